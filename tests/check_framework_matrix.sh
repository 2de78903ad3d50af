#!/usr/bin/env bash
# check_framework_matrix.sh CPPARITY SOURCE_DIR PYTHON — the parity matrix generator
# (scripts/framework_matrix.py) on results made here, and docs/frameworks.md as its output:
#   - docs/frameworks.md is exactly the rendering of docs/frameworks.json (never hand-edited);
#   - results of examples/torch-cp (Debian's torch; PYTHON) kept as the external tests keep
#     theirs (keep_result, not_supported of tests/judge/example_steps.sh): Ulysses at cp 2 on a
#     causal case (PASS, judged also against a cp 1 run, whose item in that file is not a run
#     of the matrix), the same with a planted bug (gradients not all-reduced: FAIL), and a
#     packed sliding case recorded as not supported; collected and rendered, the matrix says
#     PASS 1 in "causal only", FAIL naming the judge's worst gradient and its rank for the
#     planted bug,
#     "not supported" under packed documents with its reason in the backend's table of reasons
#     (one row per reason, naming its cases), each judged run's kernel in the backend's table,
#     "not tried" for a feature no case had, and the backend's note;
#     `check` refuses a changed page.
# Exit 0 when all holds, 1 otherwise, 77 (skip) when PYTHON has no torch with gloo. About 10 s.
set -u
cpparity=$1
source_dir=$2
python=$3
work=$(mktemp -d /tmp/cpparity-matrix-XXXXXX)
trap 'rm -rf "$work"' EXIT
source "$source_dir/tests/judge/example_steps.sh" # fail, export_case, run, judge, keep_result
matrix() { "$python" "$source_dir/scripts/framework_matrix.py" "$@"; }

matrix check "$source_dir/docs/frameworks.json" "$source_dir/docs/frameworks.md" \
    > "$work/check.out" 2>&1 || fail "docs/frameworks.md is not the rendering of its JSON"
cat "$work/check.out"

gloo_works ||
    skip "torch with a gloo process group is not available to $python:" "$work/probe.out"
export CPPARITY_MATRIX_RESULTS=$work/results
export_case full-no-padding
run "$work/cp1" --attention ulysses --cp 1
run "$work/run" --attention ulysses --cp 2
judge 0 "$work/run" --baseline "$work/cp1/rank_0.h5" # its file also holds the cp 1 run's item
keep_result example-ulysses full-no-padding-f32-cp2
kernel=$(grep -o -m1 "kernel [^,]*" "$work/judge.out" | cut -d' ' -f2-)
[ -n "$kernel" ] || fail "the judge names no kernel"
run "$work/wrong" --attention ulysses --cp 2 --wrong gradients-not-reduced
judge 1 "$work/wrong"
judged_worst=$(grep -o -m1 "worst: grads/[^ ]* rank [0-9]*" "$work/judge.out" | cut -d' ' -f2-)
[ -n "$judged_worst" ] || fail "the judge names no worst gradient for the planted bug"
keep_result example-wrong full-no-padding-f32-cp2-wrong
not_supported example-ulysses torch test sliding-w2-packed f32 2 "a reason given by the test" \
    > /dev/null
printf '## example-wrong\n\nThe planted bug: gradients not all-reduced.\n' > "$work/notes.md"

matrix collect "$work/results" --cpparity "$cpparity" --suite "$source_dir/cases/ci.yaml" \
    --notes "$work/notes.md" -o "$work/matrix.json" > "$work/collect.out" 2>&1 ||
    fail "framework_matrix.py collect"
matrix render "$work/matrix.json" -o "$work/matrix.md" > "$work/render.out" 2>&1 ||
    fail "framework_matrix.py render"
row() { grep "^| torch | .* | $1 | $2 | f32 |" "$work/matrix.md" ||
    fail "no matrix row for $1 $2"; }
column() { # ROW_TEXT N: the N-th feature column (1: causal only)
    echo "$1" | awk -F' \\| ' -v n=$(($2 + 6)) '{ print $n }'
}
passing=$(row example-ulysses contiguous)
[ "$(column "$passing" 0)" = 2 ] ||
    fail "the cp 1 baseline of judge --baseline is counted as a run: cp '$(column "$passing" 0)'"
[[ $(column "$passing" 1) == "PASS 1 ("*" of limit)" ]] ||
    fail "causal only of the passing run: '$(column "$passing" 1)'"
[ "$(column "$passing" 4)" = "not supported" ] ||
    fail "packed documents, not run: '$(column "$passing" 4)'"
[ "$(column "$passing" 6)" = "not tried" ] ||
    fail "chunked row origin, no such case: '$(column "$passing" 6)'"
failing=$(row example-wrong contiguous)
[[ $(column "$failing" 1) == "**FAIL** 1/1 ("*"× limit, $judged_worst, full-no-padding cp 2)" ]] ||
    fail "causal only of the planted bug: '$(column "$failing" 1)'"
grep -qF "| a reason given by the test | 1 | sliding-w2-packed (f32; cp 2) |" "$work/matrix.md" ||
    fail "the not-supported case's reason is not in the backend's table of reasons"
grep -qF "| full-no-padding | f32 | 2 | contiguous | $kernel | PASS |" "$work/matrix.md" ||
    fail "the backend's table does not name the run's kernel ($kernel)"
grep -q "The planted bug: gradients not all-reduced." "$work/matrix.md" ||
    fail "the backend's note is not in the page"
matrix check "$work/matrix.json" "$work/matrix.md" > /dev/null || fail "check of its own rendering"
sed -i 's/PASS 1/PASS 2/' "$work/matrix.md"
if matrix check "$work/matrix.json" "$work/matrix.md" > "$work/changed.out" 2>&1; then
    fail "check accepts a page changed by hand"
fi
echo "OK: the matrix of kept results: $(column "$passing" 1); $(column "$failing" 1)"
