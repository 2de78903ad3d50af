#!/usr/bin/env bash
# check_torch2_context_parallel.sh CPPARITY SOURCE_DIR — torch 2's own context parallelism judged
# by `cpparity judge`, in the pinned PyTorch 2 environment (scripts/torch2-env.sh; torch 2.15),
# on gloo CPU processes: two backends of examples/torch-cp/run.py, none of whose CP code is ours.
#   - torch-cp-ring (torch_context_parallel.py): torch's `context_parallel` around SDPA with
#     is_causal, i.e. its ring attention (rotation by all-gather or all-to-all, log-sum-exp merge)
#     and its head-tail load balancer, with the CPU flash op registered in its custom-op table
#     (the example's one workaround). It has no mask beyond is_causal, so it claims only cases
#     whose every layer is full causal attention on unpadded one-document rows: of
#     cases/ci.yaml that is full-no-padding (GQA, B = 2, S = 16). Every other case is exported,
#     the example says why it does not claim it, and the test records it as not supported
#     (f32 at cp 2 and bf16 at cp 4), not run. Runs: cp 1 and 2 with all-gather and head-tail,
#     cp 4 with each rotation (all-gather, all-to-all) and each balancing (head-tail: the layout
#     named zigzag; none: contiguous), bf16 at cp 4; every cp > 1 run in f32 also against the
#     cp 1 run (--baseline). Planted bugs at cp 2: the ring computing with load balancing off on
#     head-tail shards (FAIL logits rank 0 and rank 1), the dump stating contiguous positions
#     (FAIL logits rank 0);
#   - torch-cp-flex (torch_flex_context_parallel.py): flex_attention under torch's CP (keys and
#     values all-gathered, torch's CP block mask rewriting local to global indices, its load
#     balancers), the case's exact mask as a mask_mod on global positions, eager flex (its
#     backward) on the CPU. It claims every case; for time six are run, together covering
#     padding left and right, packed documents crossing shards, sliding windows, chunked layers
#     of each chunk origin (row, document, position), MQA/GQA with fewer kv heads than cp and
#     automatic padding: at cp 1, 2 and 4 in f32 with head-tail (zigzag), each cp > 1 also
#     against its cp 1 run; bf16 at cp 2 on the packed-documents case; no load balancing
#     (contiguous) at cp 4 on one case; the PTRR load balancer at cp 2 and 4 on the one-row
#     cases sliding-w2-packed and autopad-prime-length-23 and at cp 4 on the packed-documents
#     case (two rows, dealt by row 0's mask), its layout, named by the judge, printed. Planted
#     bug at cp 2: block masks made on local query indices (FAIL logits rank 1).
# Every judged run's results file is kept (keep_result torch-cp-ring / torch-cp-flex) when
# $CPPARITY_MATRIX_RESULTS is set. 35 runs of 1 to 4 ranks in one python (served.sh: torch is
# imported once) and 40 exports; about a minute alone on two cores. Exit 0 when all of that holds, 1 at the
# first surprise, 77 (skip) when the PyTorch 2 environment cannot be made or torch's CP or a
# gloo process group is unavailable in it.
set -u
cpparity=$1
source_dir=$2
work=$(mktemp -d /tmp/cpparity-torch2-cp-XXXXXX)
trap 'rm -rf "$work"' EXIT
source "$source_dir/tests/judge/example_steps.sh" # fail, skip, torch2_python, export_case, run, judge, ...

torch2_python
if ! gloo_works "from torch.distributed.tensor.experimental import context_parallel
from torch.distributed.tensor.experimental._context_parallel import _attention
from torch.nn.attention.flex_attention import flex_attention"; then
    skip "torch's context parallelism or a gloo group is unavailable to $python:" \
        "$work/probe.out"
fi
version=$("$python" -c 'import torch; print(torch.__version__)') ||
    fail "$python cannot print torch's version"

# judged DIR LAYOUT LABEL [BASELINE_DIR]: judge DIR (exit 0, LAYOUT named), keep it; also
# against BASELINE_DIR's cp 1 run when given
judged() {
    local dir=$1 layout=$2 backend=$3 label=$4 baseline=${5:-}
    judge 0 "$dir"
    keep_result "$backend" "$label"
    grep -q "# layout: $layout (cp" "$work/judge.out" ||
        fail "$backend $label: the layout is not named $layout"
    grep -q "framework torch $version" "$work/judge.out" ||
        fail "$backend $label: the dump does not name torch $version"
    [ -n "$baseline" ] && judge 0 "$dir" --baseline "$baseline/rank_0.h5"
    echo "PASS $backend $label ($layout)$([ -n "$baseline" ] && echo ', also against cp 1')"
}
# planted BACKEND CP WRONG EXPECTED...: the run judged FAIL, each EXPECTED line in the output
planted() {
    local backend=$1 cp=$2 wrong=$3
    shift 3
    run "$work/wrong" --attention "$backend" --cp "$cp" --wrong "$wrong"
    judge 1 "$work/wrong"
    for expected in "$@"; do
        grep -q "$expected" "$work/judge.out" ||
            fail "$backend --wrong $wrong: the output does not say '$expected'"
        echo "FAIL as expected: $backend --wrong $wrong: $(grep -m1 "$expected" \
            "$work/judge.out" | cut -c1-100)"
    done
}
runs=0

# --- torch-cp-ring: which cases it claims ---------------------------------------------------
mkdir -p "$work/exports"
for case in $("$cpparity" list "$source_dir/cases/ci.yaml" | awk '$1 !~ /^refuse-/ {print $1}'); do
    "$cpparity" export "$source_dir/cases/ci.yaml" --case "$case" \
        -o "$work/exports/$case.h5" > "$work/export.out" 2>&1 || fail "export of $case"
done
PYTHONPATH="$source_dir/python" "$python" \
    "$source_dir/examples/torch-cp/torch_context_parallel.py" "$work"/exports/*.h5 \
    > "$work/claims.txt" 2> "$work/claims.out" || fail "torch_context_parallel.py's claims"
claimed=$(awk -F'\t' '$2 == "claimed" {print $1}' "$work/claims.txt")
[ "$claimed" = full-no-padding ] ||
    fail "torch-cp-ring claims '$claimed' of cases/ci.yaml, expected full-no-padding only"
while IFS=$'\t' read -r case reason; do
    [ "$reason" = claimed ] && continue
    not_supported torch-cp-ring torch "$version" "$case" f32 2 "$reason"
    not_supported torch-cp-ring torch "$version" "$case" bf16 4 "$reason"
done < "$work/claims.txt"
rm -rf "$work/exports"

# --- torch-cp-ring on full-no-padding ---------------------------------------------------------
export_case full-no-padding
run "$work/cp1" --attention torch-cp-ring --cp 1
judged "$work/cp1" contiguous torch-cp-ring full-no-padding-f32-cp1
for spec in "2 allgather head-tail zigzag" "4 allgather head-tail zigzag" \
    "4 alltoall head-tail zigzag" "4 allgather none contiguous" "4 alltoall none contiguous"; do
    read -r cp rotate balancer layout <<< "$spec"
    run "$work/run" --attention torch-cp-ring --cp "$cp" --rotate "$rotate" \
        --load-balancer "$balancer"
    judged "$work/run" "$layout" torch-cp-ring \
        "full-no-padding-f32-cp$cp-$rotate-$balancer" "$work/cp1"
    runs=$((runs + 1))
done
run "$work/run" --attention torch-cp-ring --cp 4 --dtype bf16
judged "$work/run" zigzag torch-cp-ring full-no-padding-bf16-cp4
runs=$((runs + 2))
planted torch-cp-ring 2 load-balance-off-in-ring "FAIL logits rank 0" "FAIL logits rank 1"
planted torch-cp-ring 2 token-indices-unsharded-order "FAIL logits rank 0"

# --- torch-cp-flex ----------------------------------------------------------------------------
for case in packed-documents-spanning-ranks-with-length-1 llama4-style-chunked-full \
    chunked-document-origin chunked-position-origin-c7-mid-stream-starts \
    mqa-single-kv-head autopad-prime-37-packed-position-jump; do
    export_case "$case"
    run "$work/cp1" --attention torch-cp-flex --cp 1
    judged "$work/cp1" contiguous torch-cp-flex "$case-f32-cp1"
    for cp in 2 4; do
        run "$work/run" --attention torch-cp-flex --cp "$cp"
        judged "$work/run" zigzag torch-cp-flex "$case-f32-cp$cp" "$work/cp1"
    done
    runs=$((runs + 3))
done
export_case packed-documents-spanning-ranks-with-length-1
run "$work/run" --attention torch-cp-flex --cp 2 --dtype bf16
judged "$work/run" zigzag torch-cp-flex packed-documents-spanning-ranks-with-length-1-bf16-cp2
run "$work/run" --attention torch-cp-flex --cp 4 --load-balancer none
judged "$work/run" contiguous torch-cp-flex \
    packed-documents-spanning-ranks-with-length-1-f32-cp4-none
runs=$((runs + 2))
for spec in "sliding-w2-packed 2 4" "autopad-prime-length-23 2 4" \
    "packed-documents-spanning-ranks-with-length-1 4"; do
    read -r case cps <<< "$spec"
    export_case "$case"
    for cp in $cps; do
        run "$work/run" --attention torch-cp-flex --cp "$cp" --load-balancer ptrr
        judge 0 "$work/run"
        keep_result torch-cp-flex "$case-f32-cp$cp-ptrr"
        echo "PASS torch-cp-flex $case-f32-cp$cp-ptrr (layout named" \
            "$(grep -m1 -o '# layout: [a-z-]*' "$work/judge.out" | cut -c11-))"
        runs=$((runs + 1))
    done
done
planted torch-cp-flex 2 block-mask-on-local-queries "FAIL logits rank 1"

echo "torch $version context parallelism: $runs runs judged PASS, 3 planted bugs judged FAIL"
exit 0
