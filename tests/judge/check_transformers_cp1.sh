#!/usr/bin/env bash
# check_transformers_cp1.sh CPPARITY SOURCE_DIR
# transformers' own causal LMs judged by `cpparity judge` at cp 1 (examples/transformers/run.py,
# hf_model.py; transformers of the pinned PyTorch 2 environment, scripts/torch2-env.sh, 5.25.0
# today): each model.md model built as LlamaForCausalLM (every layer full), MinistralForCausalLM
# (sliding layers) or Llama4ForCausalLM (chunked layers, text-only, rotary everywhere, no MoE),
# loaded with the export's weights (strict load_state_dict), one forward and backward on the
# whole batch, attn_implementation sdpa. For every case of cases/ci.yaml but the refuse-* ones:
#   - a case the class expresses from its inputs: run in f32, judged: exit 0, kept for the
#     parity matrix as transformers/<case>-f32-cp1;
#   - a case it cannot express (padding and packed documents together: with a 2-D
#     attention_mask transformers lets packed documents attend to each other; a chunk_origin
#     whose grid differs from the positions' on packed rows, where transformers counts chunks
#     in positions): not run, recorded not_supported with run.py's reason (exit 3). With
#     transformers 5.25: 26 run, 15 not supported.
# Then three cases (full layers with padding; sliding layers; chunked, position origin, packed)
# in bf16 (autocast mixed precision) and with attn_implementation eager, judged: exit 0; and a
# planted bug (--wrong labels-shifted-twice: the already shifted labels given as labels=, so
# transformers shifts them again): exit 1, FAIL loss rank 0.
# cp 2 and 4 do not apply: this backend is transformers without any context parallelism
# (DeepSpeed's sequence parallelism of transformers' models: check_hf_deepspeed_sp.sh).
# Cost: 48 runs of under a second each in one python (served.sh), about 12 s on 2 cores.
# Exit 0 when all of that holds, 1 at the first surprise, 77 (skip) when the PyTorch 2
# environment cannot be made or transformers cannot be imported in it.
set -u
cpparity=$1
source_dir=$2
work=$(mktemp -d /tmp/cpparity-transformers-XXXXXX)
trap 'rm -rf "$work"' EXIT
source "$source_dir/tests/judge/example_steps.sh" # fail, export_case, judge, keep_result, ...
torch2_python
"$python" -c "import transformers" > "$work/import.out" 2>&1 ||
    skip "transformers cannot be imported by $python:" "$work/import.out"
version=$("$python" -c "import transformers; print(transformers.__version__)")
backend=transformers

# run_hf OUT_DIR ARGS...: run.py on $work/export.h5; returns run.py's exit code (3: not
# supported, its reason the last line of $work/run.out); fails on any other non-zero exit
run_hf() {
    local dir=$1
    shift
    rm -rf "$dir"
    local code=0
    served "$source_dir/examples/transformers/run.py" "$work/run.out" "$work/export.h5" \
        --out "$dir" "$@" || code=$?
    [ $code = 0 ] || [ $code = 3 ] || fail "run.py $*: exit $code"
    return $code
}

start=$SECONDS
passed=0
for case in $("$cpparity" list "$source_dir/cases/ci.yaml" | awk '{print $1}' | grep -v '^refuse-'); do
    export_case "$case"
    if ! run_hf "$work/dumps"; then
        not_supported "$backend" transformers "$version" "$case" f32 1 \
            "$(tail -1 "$work/run.out" | sed 's/^not supported by //')"
        continue
    fi
    judge 0 "$work/dumps"
    grep -q "framework transformers $version, kernel .*ForCausalLM-sdpa" "$work/judge.out" ||
        fail "$case: the judge does not name transformers $version and its sdpa kernel"
    keep_result "$backend" "$case-f32-cp1"
    grep -E "^$case +1 f32" "$work/judge.out"
    passed=$((passed + 1))
done
[ $passed -ge 26 ] || fail "only $passed cases ran in f32 (26 expected with transformers 5.25)"

for case in full-left-and-right-padding-in-one-batch sliding-w5-odd-crossing-shards \
        chunked-position-origin-c7-mid-stream-starts; do
    export_case "$case"
    run_hf "$work/dumps" --dtype bf16 || fail "$case: bf16 refused: $(tail -1 "$work/run.out")"
    judge 0 "$work/dumps"
    keep_result "$backend" "$case-bf16-cp1"
    grep -E "^$case +1 bf16" "$work/judge.out"
    run_hf "$work/dumps" --attn eager || fail "$case: eager refused"
    judge 0 "$work/dumps"
    grep -q "kernel .*ForCausalLM-eager" "$work/judge.out" || fail "$case: kernel not eager"
    keep_result "$backend" "$case-f32-cp1-eager"
    grep -E "^$case +1 f32" "$work/judge.out" | sed 's/$/  (eager)/'
done

export_case full-left-and-right-padding-in-one-batch
run_hf "$work/dumps" --wrong labels-shifted-twice || fail "the planted bug was refused"
judge 1 "$work/dumps"
grep -q "FAIL loss rank 0" "$work/judge.out" ||
    fail "labels shifted twice: the judge does not name the loss of rank 0"
echo "planted bug labels-shifted-twice: FAIL loss rank 0, as expected"
echo "transformers $version at cp 1: $passed cases PASS in f32, 3 in bf16 and eager;" \
    "$((SECONDS - start)) s"
