#!/usr/bin/env bash
# check_pytest_plugin.sh CPPARITY SOURCE_DIR PYTHON — cpparity's pytest plugin
# (python/cpparity/pytest_plugin.py) on tests/python/test_torch_ring_zigzag.py, the torch
# ring-zigzag example (examples/torch-cp/run.py) in a 20-line pytest file:
#   - three CI cases at cp 2 and 4 pass (6 tests, ids CASE-cpN), the session's report is an
#     index.html linking a page per test, a results file per test id;
#   - with the example's planted bug (run.py --wrong lse-merge-max-only) the test fails and
#     pytest's message names the tensor, the rank, the batch row and the position;
#   - a test planting a bug (cpparity_case.expect_failure) passes when the judge fails as the
#     pattern says, and fails when the verdict says otherwise or passes;
#   - a marked test that writes no dump fails saying which dump is missing, and a marked test
#     without the cpparity_case fixture is a usage error;
#   - docs/python.md shows the test file as it is.
# Exit 0 when all holds, 1 otherwise, 77 (skip) when PYTHON lacks pytest or torch with gloo.
# About 40 s.
set -u
cpparity=$(realpath "$1") source_dir=$(cd "$2" && pwd) python=$3
work=$(mktemp -d /tmp/cpparity-pytest-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; for f in "$work"/*.out; do echo "--- $f"; tail -30 "$f"; done; exit 1; }
"$python" -c "import pytest, torch.distributed as d; assert d.is_gloo_available()" \
    > "$work/probe.out" 2>&1 ||
    { echo "SKIP: $python lacks pytest or torch with gloo:"; tail -2 "$work/probe.out"; exit 77; }
export CPPARITY=$cpparity PYTHONPATH=$source_dir/python
pytest() { (cd "$work" && "$python" -m pytest -p cpparity.pytest_plugin -p no:cacheprovider "$@"); }
test_file=$source_dir/tests/python/test_torch_ring_zigzag.py
# docs/python.md shows this file as it is
awk '/^## The pytest plugin/{on=1} on && /^```python$/{copy=1; next} copy && /^```$/{exit} copy' \
    "$source_dir/docs/python.md" > "$work/documented.py"
cmp -s "$work/documented.py" "$test_file" ||
    fail "docs/python.md's pytest file is not tests/python/test_torch_ring_zigzag.py"

pytest "$test_file" -q --cpparity-dir "$work/files" --cpparity-report "$work/report" \
    > "$work/pass.out" 2>&1 || fail "the ring-zigzag example does not pass"
grep -q "^6 passed" "$work/pass.out" || fail "not 6 tests passing"
for id in full-no-padding-cp2 sliding-w5-odd-crossing-shards-cp4 \
          packed-documents-spanning-ranks-with-length-1-cp2; do
    [ -f "$work/files/results/test_ring_zigzag_$id.h5" ] || fail "no results file for $id"
done
[ "$(grep -o '<tr class="pass">' "$work/report/index.html" | wc -l)" = 6 ] ||
    fail "the session report's index does not list 6 passing tests"
[ "$(ls "$work/report"/*.html | wc -l)" = 7 ] || fail "not a page per test"

CPPARITY_WRONG=lse-merge-max-only pytest "$test_file" -q -k "sliding-w5-odd-crossing-shards-cp2" \
    > "$work/wrong.out" 2>&1 && fail "the planted bug passes"
grep -q "^1 failed" "$work/wrong.out" || fail "the planted bug is not one failing test"
grep -Eq "ParityError: cpparity: 1 of 1 runs failed" "$work/wrong.out" ||
    fail "the failure is not the verdict"
grep -Eq "FAIL logits rank [0-9]+ batch row [0-9]+ position [0-9]+ vocab [0-9]+: error" \
    "$work/wrong.out" || fail "the message does not name the logits' rank, row and position"
grep -Eq "FAIL grads/model\.[a-z_.0-9]+ rank [0-9]+ row" "$work/wrong.out" ||
    fail "the message does not name a gradient and its rank"

cat > "$work/test_misuse.py" << EOF_PY
import pytest
SUITE = "$source_dir/cases/ci.yaml"

@pytest.mark.cpparity(suite=SUITE, cases=["full-no-padding"], cp=[2])
def test_writes_nothing(cpparity_case):
    pass
EOF_PY
pytest "$work/test_misuse.py" -q > "$work/misuse.out" 2>&1 && fail "a test without dumps passes"
grep -q "the test wrote no dump .*rank_0.h5 (cp 2" "$work/misuse.out" ||
    fail "a missing dump is not named"
# a test planting a bug on purpose: passes when the judge fails as expected, fails when the bug
# is caught otherwise or not at all
cat > "$work/test_planted.py" << EOF_PY
import subprocess, sys, pytest

@pytest.mark.cpparity(suite="$source_dir/cases/ci.yaml", cases=["sliding-w5-odd-crossing-shards"])
@pytest.mark.parametrize("wrong, pattern", [
    ("lse-merge-max-only", r"FAIL logits rank \d+ batch row \d+ position"),
    ("lse-merge-max-only", r"FAIL logits rank 9"), (None, r"FAIL logits")],
    ids=["caught", "caught-otherwise", "not-caught"])
def test_planted(cpparity_case, wrong, pattern):
    cpparity_case.expect_failure(pattern)
    subprocess.run([sys.executable, "$source_dir/examples/torch-cp/run.py", cpparity_case.export,
                    "--cp", "2", "--attention", "ring", "--out", cpparity_case.dumps]
                   + (["--wrong", wrong] if wrong else []), check=True)
EOF_PY
pytest "$work/test_planted.py" -q -rf > "$work/planted.out" 2>&1 && fail "every planted test passes"
grep -q "^2 failed, 1 passed" "$work/planted.out" || fail "not 1 planted test passing, 2 failing"
grep -q "^FAILED .*-caught-otherwise]" "$work/planted.out" &&
    grep -q "the planted bug failed, but not as expected: no match for 'FAIL logits rank 9'" \
        "$work/planted.out" || fail "a planted bug caught otherwise is not said"
grep -q "^FAILED .*-not-caught]" "$work/planted.out" &&
    grep -q "the planted bug was not found: sliding-w5-odd-crossing-shards cp 2 passed" \
        "$work/planted.out" || fail "a planted bug not caught is not said"
cat > "$work/test_no_fixture.py" << EOF_PY
import pytest

@pytest.mark.cpparity(suite="$source_dir/cases/ci.yaml", cases=["full-no-padding"])
def test_forgets_the_fixture():
    pass
EOF_PY
pytest "$work/test_no_fixture.py" -q > "$work/usage.out" 2>&1 && fail "a test without the fixture runs"
grep -q "needs the test to take the fixture cpparity_case" "$work/usage.out" ||
    fail "the usage error does not say what is missing"
echo "OK: 6 parity tests pass through the plugin; the planted bug fails naming $(grep -Eo \
    'logits rank [0-9]+ batch row [0-9]+ position [0-9]+' "$work/wrong.out" | head -1)"
