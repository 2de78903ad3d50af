#!/usr/bin/env bash
# check_attention_blocks.sh — attention-level items by query blocks, spread over the ranks
# (harness/running/attention_stream.h), on tests/data/attention_blocks.yaml:
#   1. the whole item on one rank, then the same case by query blocks (--query-block) on two
#      ranks: it passes, says how it ran, holds the whole item's eight records a layer, and each
#      record's naive baseline error is the whole item's (the float64 reference and the naive
#      baseline by windows are the same computations, so the same errors up to the order the
#      ranks' sums of squares are added in: 1e-9 relative) and its error within a factor of 2 of
#      the whole item's (the kernel's dk and dv are sums of its block calls' shares);
#      under MPI also with --fresh (every process draws a seed: the home rank's is used);
#   2. a kernel whose sliding window is off by one (plugin bug 1) fails, named at a position;
#      one that evaluates the mask on a block's row numbers, not its tokens (bug 8), fails too;
#   3. (local only) a case that does not fit whole under --max-memory runs by blocks of 4096
#      without being asked, and one whose blocks do not fit either is refused, saying so.
# usage: check_attention_blocks.sh local|mpi CPPARITY SUITE WORKDIR PYTHON PLUGIN_DIR [MPIEXEC
#        MPIEXEC_FLAGS...]
set -u
mode=$1 cpparity=$2 suite=$3 work=$4 python=$5 plugins=$6
shift 6
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
case_name=query-blocks-padded-packed

# the query-block runs: two local ranks, or two MPI processes (mpiexec and its flags last)
if [ "$mode" = mpi ]; then
    launch=("$@" -np 2 "$cpparity" run "$suite")
    block=512
else
    launch=("$cpparity" run "$suite" --comm local --ranks 2)
    block=256
fi

# 1. whole, then by query blocks on two ranks
rm -f "$work"/*.h5 # what an earlier run left
"$cpparity" run "$suite" --case "$case_name" --comm local --ranks 1 --out "$work/whole.h5" \
    >"$work/whole.txt" 2>&1 || { cat "$work/whole.txt"; fail "the whole item did not pass"; }
out=$("${launch[@]}" --case "$case_name" --query-block $block --out "$work/blocks.h5" 2>&1)
code=$?
printf '%s\n' "$out" | tail -4
[ $code = 0 ] || fail "by query blocks: exit $code, expected 0"
printf '%s\n' "$out" | grep -q "by query blocks of $block tokens on 2 ranks" ||
    fail "the item does not say it ran by query blocks of $block tokens on 2 ranks"
"$python" - "$work/whole.h5" "$work/blocks.h5" "$case_name" <<'EOF' || exit 1
import sys
import h5py

whole_path, blocks_path, case = sys.argv[1:4]
def records(path):
    metrics = h5py.File(path, "r")[f"cases/{case}/f32/cp_1/metrics"][()]
    return {row["tensor"].decode(): row for row in metrics}
whole, blocks = records(whole_path), records(blocks_path)
expected = [f"attention/layers.{l}.{t}" for l in range(3)
            for t in ["out", "lse", "dq", "dk", "dv", "backward_alone.dq", "backward_alone.dk",
                      "backward_alone.dv"]]
if sorted(blocks) != sorted(expected):
    sys.exit(f"records by query blocks: {sorted(blocks)}, expected {sorted(expected)}")
for name in expected:
    w, b = whole[name], blocks[name]
    # the same reference and baseline: equal errors but for the order of the ranks' sums
    if abs(b["baseline_error"] - w["baseline_error"]) > 1e-9 * w["baseline_error"]:
        sys.exit(f"{name}: naive baseline error {b['baseline_error']:.17g} by query blocks, "
                 f"{w['baseline_error']:.17g} whole: the reference or the baseline differs")
    # the kernel: the same calls for out, lse, dq; sums of block shares for dk, dv
    if not (w["relative_l2"] / 2 <= b["relative_l2"] <= 2 * w["relative_l2"] + 1e-12):
        sys.exit(f"{name}: error {b['relative_l2']:.3e} by query blocks, {w['relative_l2']:.3e} "
                 "whole: more than a factor of 2 apart")
    if not b["passed"]:
        sys.exit(f"{name}: failed by query blocks")
print(f"{len(expected)} records: baseline errors equal, errors within a factor of 2")
EOF

# under MPI each process draws its own fresh seed: the home rank's must be every rank's (else the
# ranks' inputs would differ and the kernel would fail against the reference)
if [ "$mode" = mpi ]; then
    out=$("${launch[@]}" --case "$case_name" --query-block $block --fresh --out "$work/fresh.h5" 2>&1)
    code=$?
    [ $code = 0 ] || { printf '%s\n' "$out" | tail -8; fail "--fresh by query blocks: exit $code"; }
    printf '%s\n' "$out" | grep -q "inputs from seed" || fail "--fresh: no seed named"
fi

# 2. planted bugs in a kernel plugin
out=$("${launch[@]}" --case "$case_name" --query-block $block \
    --kernel "$plugins/libnaive_attention_bug1.so" --out "$work/bug1.h5" 2>&1)
code=$?
[ $code = 1 ] || { printf '%s\n' "$out" | tail -20; fail "window off by one: exit $code, expected 1"; }
printf '%s\n' "$out" | grep -Eq 'FAIL attention/layers\.1\.out batch row [01] position [0-9]+ head [0-9]+ dim [0-9]+: error' ||
    { printf '%s\n' "$out" | tail -20; fail "window off by one: the sliding layer's out is not named at a position"; }
out=$("${launch[@]}" --case "$case_name" --query-block $block \
    --kernel "$plugins/libnaive_attention_bug8.so" --out "$work/bug8.h5" 2>&1)
code=$?
[ $code = 1 ] || { printf '%s\n' "$out" | tail -20; fail "mask on row numbers: exit $code, expected 1"; }
printf '%s\n' "$out" | grep -Eq 'FAIL attention/layers\.[0-2]\.(out|lse|dq)' ||
    fail "mask on row numbers: no forward tensor failed"
echo "planted bugs fail, located"
[ "$mode" = mpi ] && exit 0

# 3. chosen by the memory limit (whole about 29 MiB, by blocks about 16 MiB)
out=$("$cpparity" run "$suite" --case query-blocks-sliding-s16384 --comm local --ranks 1 \
    --max-memory 24M --out "$work/auto.h5" 2>&1)
code=$?
[ $code = 0 ] || { printf '%s\n' "$out" | tail -8; fail "under --max-memory 24M: exit $code"; }
printf '%s\n' "$out" | grep -q "by query blocks of 4096 tokens on 1 rank" ||
    fail "a case that does not fit whole did not run by query blocks"
out=$("$cpparity" run "$suite" --case query-blocks-sliding-s16384 --comm local --ranks 1 \
    --max-memory 4M --out "$work/refused.h5" 2>&1)
code=$?
[ $code = 2 ] || fail "under --max-memory 4M: exit $code, expected 2"
printf '%s\n' "$out" | grep -q "attention by query blocks of 4096 tokens over the ranks: 1 x" ||
    fail "the refusal does not say the blocks do not fit: $out"
echo "the memory limit chooses query blocks, and refuses what does not fit by blocks"
rm -f "$work"/*.h5
