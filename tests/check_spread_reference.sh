#!/usr/bin/env bash
# check_spread_reference.sh MPIRUN CPPARITY SUITE PYTHON [ROOT_FLAG] — the float64 reference is
# the same bits on 1, 2 and 4 ranks: each case of SUITE is exported by one process and by
# `mpirun -np 2` and `-np 4` (the reference spread over the ranks by row blocks,
# docs/architecture.md), and every /reference dataset of the files (loss, logits, every gradient)
# must be identical byte for byte. Then `mpirun -np 2 cpparity judge` of dumps of the export
# passes as one process's judge does (the naive baseline spread too: the same limits), and fails,
# naming the same element, on a planted error;
# its discrimination reruns, spread too, give one process's records bit for bit.
set -u
mpirun=$1 cpparity=$2 suite=$3 python=$4 root_flag=${5:-}
source_dir=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/cpparity-spread-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

for case in $("$cpparity" list "$suite" --names); do
    "$cpparity" export "$suite" --case "$case" -o "$work/$case-1.h5" > "$work/out" 2>&1 ||
        { cat "$work/out"; fail "$case: export on one process"; }
    for ranks in 2 4; do
        "$mpirun" $root_flag --oversubscribe -np $ranks "$cpparity" export "$suite" --case "$case" \
            -o "$work/$case-$ranks.h5" > "$work/out" 2>&1 ||
            { cat "$work/out"; fail "$case: export on $ranks ranks"; }
        grep -q "^# float64 reference spread over $ranks ranks" "$work/out" ||
            fail "$case: the export on $ranks ranks does not say it spread the reference"
        "$python" - "$work/$case-1.h5" "$work/$case-$ranks.h5" << 'EOF_PY' ||
import sys, h5py
one, spread = (h5py.File(p, "r") for p in sys.argv[1:3])
names = []
one["reference"].visit(lambda n: names.append(n) if isinstance(one["reference"][n], h5py.Dataset) else None)
assert len(names) > 3, f"only {names} in /reference"
for name in names:
    a, b = one["reference"][name][()], spread["reference"][name][()]
    assert a.shape == b.shape and a.tobytes() == b.tobytes(), \
        f"/reference/{name} differs in its bits ({sys.argv[2]})"
print(f"{len(names)} /reference datasets identical bit for bit")
EOF_PY
            fail "$case: one process and $ranks ranks differ"
    done
    echo "ok $case: the same bits on 1, 2 and 4 ranks"
done

# judge on 2 ranks: the same verdicts as on one process
case=$("$cpparity" list "$suite" --names | head -1)
"$python" "$source_dir/tests/judge/make_dumps.py" "$work/$case-1.h5" "$work/right" --cp 2 > /dev/null ||
    fail "make_dumps.py"
"$python" "$source_dir/tests/judge/make_dumps.py" "$work/$case-1.h5" "$work/wrong" --cp 2 \
    --wrong logits-noise > /dev/null || fail "make_dumps.py --wrong"
for dumps in right wrong; do
    "$cpparity" judge "$work/$case-1.h5" "$work/$dumps"/rank_*.h5 --out "$work/$dumps-1.h5" \
        > "$work/$dumps-1.out" 2>&1
    one=$?
    "$mpirun" $root_flag --oversubscribe -np 2 "$cpparity" judge "$work/$case-1.h5" \
        "$work/$dumps"/rank_*.h5 --out "$work/$dumps-2.h5" > "$work/$dumps-2.out" 2>&1
    two=$?
    [ $one = $two ] || fail "judge of the $dumps dumps: exit $one on one process, $two on 2 ranks"
    grep -q "^# float64 reference spread over 2 ranks" "$work/$dumps-2.out" ||
        fail "the judge on 2 ranks does not say it spread the reference"
    grep -q "^# naive [a-z0-9]* baseline spread over 2 ranks" "$work/$dumps-2.out" ||
        fail "the judge on 2 ranks does not say it spread the naive baseline"
    diff <(grep -E ' (PASS|FAIL)$|^ +(FAIL|[0-9]+ tensor)' "$work/$dumps-1.out") \
        <(grep -E ' (PASS|FAIL)$|^ +(FAIL|[0-9]+ tensor)' "$work/$dumps-2.out") ||
        fail "judge of the $dumps dumps: the verdicts differ between 1 process and 2 ranks"
done
grep -q "FAIL logits rank" "$work/wrong-2.out" || fail "the planted error is not named"
# the discrimination check's reruns spread too (reference_service: discrimination_share), the
# same records bit for bit (the case has padding, packed documents, a window and chunks)
grep -q "^# discrimination reruns computed by the 2 ranks together" "$work/right-2.out" ||
    fail "the judge on 2 ranks does not say it spread the discrimination reruns"
"$python" "$source_dir/tests/compare_discrimination.py" "$work/right-1.h5" "$work/right-2.h5" ||
    fail "the judge's discrimination records differ between 1 process and 2 ranks"
echo "ok judge on 2 ranks: the same verdicts as on one process"

# The long-context route on the same case: an export without /reference/logits (--no-logits),
# dumps written one block of rows at a time from its /reference/final_normed
# (cpparity_dump.ComputedLogits, make_dumps.py --lazy), judged on 2 ranks: they pass, and one
# element off in the last real row fails, located at that position.
"$cpparity" export "$suite" --case "$case" --no-logits -o "$work/no-logits.h5" > /dev/null 2>&1 ||
    fail "export --no-logits"
"$python" -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r'); assert 'reference/logits' not in f and 'reference/final_normed' in f" \
    "$work/no-logits.h5" || fail "export --no-logits: /reference/logits written, or no /reference/final_normed"
"$python" "$source_dir/tests/judge/make_dumps.py" "$work/no-logits.h5" "$work/lazy" --cp 4 \
    --layout zigzag --lazy > /dev/null || fail "make_dumps.py --lazy"
"$python" "$source_dir/tests/judge/make_dumps.py" "$work/no-logits.h5" "$work/last" --cp 4 \
    --layout zigzag --wrong last-block-element > "$work/last.txt" || fail "make_dumps.py --wrong last-block-element"
position=$(grep -o '(position [0-9]*)' "$work/last.txt" | grep -o '[0-9]*')
[ -n "$position" ] || fail "make_dumps.py did not say where it planted the error"
"$mpirun" $root_flag --oversubscribe -np 2 "$cpparity" judge "$work/no-logits.h5" "$work/lazy"/rank_*.h5 \
    --out "$work/lazy.h5" > "$work/lazy.out" 2>&1 || { cat "$work/lazy.out"; fail "judge of lazily written dumps"; }
"$mpirun" $root_flag --oversubscribe -np 2 "$cpparity" judge "$work/no-logits.h5" "$work/last"/rank_*.h5 \
    --out "$work/last.h5" > "$work/last.out" 2>&1
code=$?
[ $code = 1 ] || { cat "$work/last.out"; fail "one element off in the last row: exit $code, expected 1"; }
grep -q "FAIL logits rank [0-9]* batch row 0 position $position vocab " "$work/last.out" ||
    { cat "$work/last.out"; fail "the element off at position $position is not named"; }
echo "ok the long-context route: --no-logits export, lazily written dumps, a one-element error located"
