#!/usr/bin/env bash
# check_torch_examples.sh CPPARITY SOURCE_DIR PYTHON — examples/torch-cp (Ulysses and ring
# context parallelism in PyTorch over gloo on CPU processes) judged by `cpparity judge`, as a
# framework author would run it:
#   - three CI cases exported; run.py with Ulysses (contiguous layout) at cp 1, 2 and 4 and ring
#     attention (zigzag layout) at cp 2 and 4 in f32, and at cp 1 and 4 in bf16 (for time); every
#     run judged, those at cp > 1 also with the example's own cp 1 run as --baseline: exit 0, the
#     layout named. The cases: packed documents crossing every shard boundary with left and right
#     padding (full attention); Llama4-style chunked layers with C = 5 not dividing a shard, left
#     padding and packing; automatic padding (S = 37, prime) with a sliding layer, packing and a
#     position jump;
#   - each planted bug (run.py --wrong) at cp 2 on the packed-documents case: the split
#     documents with Ulysses and ring attention, the shifted labels and unreduced gradients with
#     Ulysses, the max-only log-sum-exp merge and the swapped zigzag chunks with ring attention:
#     exit 1, the output naming the failing tensor and a rank.
# Exit 0 when all of that holds, 1 at the first surprise, 77 (skip) when torch cannot be imported
# or a gloo process group cannot start.
set -u
cpparity=$1
source_dir=$2
python=$3
work=$(mktemp -d /tmp/cpparity-torch-cp-XXXXXX)
trap 'rm -rf "$work"' EXIT
source "$source_dir/tests/judge/example_steps.sh" # fail, export_case, run, judge

gloo_works ||
    skip "torch with a gloo process group is not available to $python:" "$work/probe.out"


for case in packed-documents-spanning-ranks-with-length-1 llama4-style-chunked-full \
    autopad-prime-37-packed-position-jump; do
    export_case "$case"
    for dtype in f32 bf16; do
        run "$work/cp1" --attention ulysses --cp 1 --dtype "$dtype"
        judge 0 "$work/cp1"
        echo "PASS $case $dtype ulysses cp 1"
        specs=("ulysses 2 contiguous" "ulysses 4 contiguous" "ring 2 zigzag" "ring 4 zigzag")
        [ "$dtype" = bf16 ] && specs=("ulysses 4 contiguous" "ring 4 zigzag")
        for spec in "${specs[@]}"; do
            read -r attention cp layout <<< "$spec"
            run "$work/run" --attention "$attention" --cp "$cp" --dtype "$dtype"
            judge 0 "$work/run"
            grep -q "# layout: $layout (cp $cp" "$work/judge.out" ||
                fail "$case $dtype $spec: the layout is not named $layout"
            judge 0 "$work/run" --baseline "$work/cp1/rank_0.h5"
            echo "PASS $case $dtype $attention cp $cp (also against its cp 1 run)"
        done
    done
done

# Planted bugs at cp 2, where documents cross the shard boundary: exit 1, tensor and rank named;
# an unreduced gradient leaves logits and loss right.
export_case packed-documents-spanning-ranks-with-length-1
for spec in "ring mask-from-local-positions FAIL logits rank 1" \
    "ulysses mask-from-local-positions FAIL logits rank 1" \
    "ulysses labels-shifted-in-shard FAIL grads/model.layers.0.self_attn.q_proj.weight rank 0" \
    "ring lse-merge-max-only FAIL logits rank 1" \
    "ring zigzag-second-chunk-first FAIL logits rank 0" \
    "ulysses gradients-not-reduced FAIL grads/model.layers.0.self_attn.q_proj.weight rank 1"; do
    read -r attention wrong expected <<< "$spec"
    run "$work/wrong" --attention "$attention" --cp 2 --wrong "$wrong"
    judge 1 "$work/wrong"
    grep -q "$expected" "$work/judge.out" ||
        fail "$attention --wrong $wrong: the output does not say '$expected'"
    echo "FAIL as expected: $attention --wrong $wrong: $(grep -m1 "$expected" "$work/judge.out" |
        cut -c1-100)"
done
grep -qE "FAIL (logits|loss) rank" "$work/judge.out" &&
    fail "--wrong gradients-not-reduced: logits or loss fail, only gradients should"
echo "torch-cp examples: 24 runs judged PASS, 6 planted bugs judged FAIL"
exit 0
