#!/usr/bin/env bash
# check_deepspeed_autosp.sh CPPARITY SOURCE_DIR — DeepSpeed's AutoSP (the DeepCompile pass
# "autosp": automatic Ulysses sequence parallelism rewritten into the torch.compile graph,
# DeepSpeed 0.19.8 of scripts/torch2-env.sh) judged by `cpparity judge`, on gloo CPU processes
# with inductor's C++ backend: examples/deepspeed-autosp/run.py compiles transformers' own
# LlamaForCausalLM / MinistralForCausalLM (sdpa), loaded with the export's weights, with
# `engine.compile()`; every rank is given the whole batch and AutoSP slices input_ids, labels and
# position_ids to contiguous shards in the graph and all-to-alls q, k, v and the output around
# each SDPA. Runs (backend deepspeed-autosp, every one judged and kept):
#   - f32: sliding-w5-odd-crossing-shards at cp 1 (sliding windows, left padding: the model, its
#     masks and the loss as given to AutoSP); full-left-and-right-padding-in-one-batch at cp 2
#     (padding, transformers' mask from the 2D attention_mask inside the graph);
#     packed-documents-spanning-ranks-with-length-1 at cp 2 (packed documents crossing the shard
#     boundary, masks made by transformers from the whole sequence); mha-batch-3-heads-more-
#     than-cp at cp 4 (a full and a sliding layer, left padding, packing, 8 heads, B = 3);
#   - bf16 (DeepSpeed's bf16) on the packed-documents case at cp 2;
#   - planted bug at cp 2 on the padding case: labels shifted by the model inside each shard
#     (--wrong labels-shifted-in-shard, what DeepSpeed's own AutoSP test does with labels =
#     input_ids): FAIL loss rank 0 and FAIL grads/model.embed_tokens.weight rank 1;
#   - known limitation, asserted every run and printed: transformers' packing format
#     (position_ids, no attention_mask) does not compile under AutoSP at cp 2 ("expand:
#     attempting to expand a dimension of length s38 -> (s38//2)" in sp_compile.py's
#     pass_propagate_shapes); if it ever compiles, this test fails so the record is updated.
# Chunked layers have no transformers model of this architecture (only Llama4): every case with
# a chunked layer is recorded not supported (f32 and bf16 at cp 2), not run.
# Each run compiles with inductor (C++ on the CPU): about 15 to 45 s a run, about 3 minutes in
# all alone on two cores with a cold inductor cache, under 2 with a warm one. Exit 0 when all of
# that holds, 1 at the first surprise, 77 (skip) when the PyTorch 2 environment cannot be made,
# DeepSpeed or transformers cannot be imported in it, or a gloo process group cannot start.
set -u
cpparity=$1
source_dir=$2
work=$(mktemp -d /tmp/cpparity-ds-autosp-XXXXXX)
trap 'rm -rf "$work"' EXIT
source "$source_dir/tests/judge/example_steps.sh" # fail, export_case, judge, keep_result, ...

torch2_python
if ! gloo_works "import os
os.environ.setdefault('DS_ACCELERATOR', 'cpu')
import deepspeed
from deepspeed.compile.passes.sp_compile import prepare_autosp_inputs
import transformers"; then
    skip "DeepSpeed's AutoSP, transformers or a gloo group is unavailable to $python:" \
        "$work/probe.out"
fi
version=$(DS_ACCELERATOR=cpu "$python" -c 'import deepspeed; print(deepspeed.__version__)' \
    2> "$work/version.out") || fail "$python cannot print DeepSpeed's version"
backend=deepspeed-autosp

# autosp OUT_DIR RUN_ARGS...: examples/deepspeed-autosp/run.py on the export
autosp() {
    local dir=$1
    shift
    rm -rf "$dir"
    served "$source_dir/examples/deepspeed-autosp/run.py" "$work/run.out" "$work/export.h5" \
        --out "$dir" "$@" || fail "deepspeed-autosp run.py $*"
}
# judged CASE DTYPE CP: run it, judge it (exit 0, framework deepspeed named), keep it
judged() {
    local case=$1 dtype=$2 cp=$3
    autosp "$work/run" --cp "$cp" --dtype "$dtype"
    judge 0 "$work/run"
    keep_result "$backend" "$case-$dtype-cp$cp"
    grep -q "framework deepspeed $version" "$work/judge.out" ||
        fail "$case $dtype cp $cp: the dump does not name deepspeed $version"
    echo "PASS $backend $case $dtype cp $cp ($(grep -m1 -E "^$case " "$work/judge.out" |
        awk '{print "worst", $4, $5, "error", $6, "limit", $7}'))"
}

# --- cases it cannot express: chunked attention -------------------------------------------
reason="chunked attention: transformers' only chunked-attention model is Llama4, not this"
reason="$reason architecture (docs/model.md), so there is no transformers model for AutoSP to"
reason="$reason compile"
for case in $("$cpparity" list "$source_dir/cases/ci.yaml" |
    awk '$1 !~ /^refuse-/ && / chunked x/ {print $1}'); do
    not_supported "$backend" deepspeed "$version" "$case" f32 2 "$reason"
    not_supported "$backend" deepspeed "$version" "$case" bf16 2 "$reason"
done

# --- judged runs ------------------------------------------------------------------------------
export_case sliding-w5-odd-crossing-shards
judged sliding-w5-odd-crossing-shards f32 1
export_case full-left-and-right-padding-in-one-batch
judged full-left-and-right-padding-in-one-batch f32 2

# planted bug: the labels shifted inside each shard
autosp "$work/wrong" --cp 2 --wrong labels-shifted-in-shard
judge 1 "$work/wrong"
for expected in "FAIL loss rank 0" "FAIL grads/model.embed_tokens.weight rank 1"; do
    grep -q "$expected" "$work/judge.out" ||
        fail "--wrong labels-shifted-in-shard: the output does not say '$expected'"
    echo "FAIL as expected: --wrong labels-shifted-in-shard: $(grep -m1 "$expected" \
        "$work/judge.out" | cut -c1-100)"
done

export_case packed-documents-spanning-ranks-with-length-1
judged packed-documents-spanning-ranks-with-length-1 f32 2
judged packed-documents-spanning-ranks-with-length-1 bf16 2

# known limitation: transformers' packing format under AutoSP
rm -rf "$work/packing"
if served "$source_dir/examples/deepspeed-autosp/run.py" "$work/packing.out" "$work/export.h5" \
    --cp 2 --packing position-ids --out "$work/packing"; then
    fail "transformers' packing format (position_ids, no attention_mask) now compiles under" \
        "AutoSP: judge it and update examples/deepspeed-autosp and this test"
fi
finding="expand: attempting to expand a dimension of length s[0-9]* -> (s[0-9]*//2)"
grep -q "$finding" "$work/packing.out" && grep -q "in pass_propagate_shapes" "$work/packing.out" ||
    fail "--packing position-ids failed otherwise than known (see packing.out)"
echo "KNOWN LIMITATION: transformers' packing format at cp 2: $(grep -m1 -o "$finding" \
    "$work/packing.out") in AutoSP's pass_propagate_shapes"

export_case mha-batch-3-heads-more-than-cp
judged mha-batch-3-heads-more-than-cp f32 4
