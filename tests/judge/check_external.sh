#!/usr/bin/env bash
# check_external.sh CPPARITY SOURCE_DIR VENV_DIR [BASE_PYTHON]
# check_external.sh CPPARITY SOURCE_DIR --torch2
# A third-party context-parallel implementation judged by `cpparity judge`: DeepSpeed's Ulysses
# (deepspeed.sequence.layer.DistributedAttention) around examples/torch-cp's local attention
# (run.py --attention deepspeed-ulysses, deepspeed_ulysses.py), on gloo CPU processes. None of
# DeepSpeed's code is in the project: it is pip-installed. Two DeepSpeeds:
#   - VENV_DIR: DeepSpeed 0.18.6, the newest that imports with Debian's torch 1.13. The venv is
#     created if missing: BASE_PYTHON (default /usr/bin/python3, Debian's, with python3-torch
#     1.13, numpy and h5py) -m venv --system-site-packages, so the venv uses the system's torch;
#     where python3-venv is not installed (no ensurepip) the venv is made --without-pip and
#     Debian's python3-pip installs into it. DeepSpeed is installed there with pip's cache, and
#     torch is never taken from PyPI: a constraints file pins it to the installed version, so a
#     DeepSpeed that wanted another torch would fail to resolve rather than download one;
#   - --torch2: the DeepSpeed of the pinned PyTorch 2 environment (scripts/torch2-env.sh, made
#     once per machine; 0.19.8 on torch 2.15 today).
# Then, for either:
#   - two CI cases exported (packed documents crossing every shard boundary with left and right
#     padding; S = 37 prime, so cp > 1 pads, with a sliding layer, packing and a position jump),
#     with --torch2 three more (Llama4-style chunked layers; chunks counted in positions with
#     documents starting mid-stream; fewer kv heads than cp);
#     run.py at cp 1, 2 and 4 in f32 and at cp 2 in bf16 (first case); every run judged: exit
#     0, the layout named contiguous, the framework deepspeed at the pinned version; those at
#     cp > 1 in f32 also against the cp 1 run (--baseline); each results file kept for the
#     parity matrix (keep_result deepspeed-ulysses-<version>) when $CPPARITY_MATRIX_RESULTS is set;
#   - a planted bug (--wrong mask-from-local-positions) at cp 2: exit 1, FAIL logits rank 1.
# Exit 0 when all of that holds, 1 at the first surprise, 77 (skip) when the venv cannot be
# made, pip cannot install DeepSpeed (no network, say), or DeepSpeed cannot be imported or a
# gloo process group cannot start.
set -u
cpparity=$1
source_dir=$2
venv=$3
base_python=${4:-/usr/bin/python3}
work=$(mktemp -d /tmp/cpparity-external-XXXXXX)
trap 'rm -rf "$work"' EXIT
source "$source_dir/tests/judge/example_steps.sh" # fail, export_case, run, judge, keep_result

if [ "$venv" = --torch2 ]; then
    # the pinned PyTorch 2 environment: DeepSpeed's version is whatever its pins say
    torch2_python
    deepspeed_version=$(grep -o '^deepspeed==[^ ]*' "$source_dir/scripts/torch2-constraints.txt" |
        cut -d= -f3)
else
    # the newest DeepSpeed whose import works with torch 1.13 (0.18.7 on call
    # torch.amp.custom_fwd)
    deepspeed_version=0.18.6
    python=$venv/bin/python
    # the venv: Debian's torch through --system-site-packages, DeepSpeed pinned
    if [ ! -x "$python" ]; then
        "$base_python" -m venv --system-site-packages "$venv" > "$work/venv.out" 2>&1 ||
            { rm -rf "$venv"; "$base_python" -m venv --system-site-packages --without-pip \
                "$venv" >> "$work/venv.out" 2>&1; } ||
            skip "$base_python cannot make a venv at $venv:" "$work/venv.out"
    fi
    "$python" -m pip --version > "$work/pip.out" 2>&1 ||
        skip "no pip for $python (neither python3-venv's ensurepip nor python3-pip):" \
            "$work/pip.out"
    if ! "$python" - "$deepspeed_version" <<'EOF' 2> /dev/null; then
import importlib.metadata, sys
sys.exit(importlib.metadata.version("deepspeed") != sys.argv[1])
EOF
        "$python" - > "$work/constraints.txt" 2> "$work/pip.out" <<'EOF' ||
import importlib.metadata
print("torch==" + importlib.metadata.version("torch"))
EOF
            skip "torch is not installed for $python:" "$work/pip.out"
        start=$SECONDS
        "$python" -m pip install --disable-pip-version-check --retries 2 \
            -c "$work/constraints.txt" "deepspeed==$deepspeed_version" > "$work/pip.out" 2>&1 ||
            skip "pip cannot install deepspeed==$deepspeed_version into $venv:" "$work/pip.out"
        echo "installed deepspeed $deepspeed_version into $venv in $((SECONDS - start)) s"
    fi
fi
backend=deepspeed-ulysses-$deepspeed_version

# DeepSpeed importable on CPU, and a gloo process group
if ! DS_ACCELERATOR=cpu gloo_works "import deepspeed
from deepspeed.sequence.layer import DistributedAttention"; then
    skip "DeepSpeed $deepspeed_version on CPU or a gloo group is unavailable to $python:" \
        "$work/probe.out"
fi


runs=0
cases=(packed-documents-spanning-ranks-with-length-1 autopad-prime-37-packed-position-jump)
# torch 2's DeepSpeed also on chunked layers (row and position origins) and kv heads < cp
[ "$venv" = --torch2 ] && cases+=(llama4-style-chunked-full
    chunked-position-origin-c7-mid-stream-starts gqa-kv-heads-fewer-than-cp)
for case in "${cases[@]}"; do
    export_case "$case"
    specs=("f32 1" "f32 2" "f32 4")
    [ "$case" = packed-documents-spanning-ranks-with-length-1 ] && specs+=("bf16 2")
    for spec in "${specs[@]}"; do
        read -r dtype cp <<< "$spec"
        dir=$work/run
        [ "$cp" = 1 ] && dir=$work/cp1_$dtype
        run "$dir" --attention deepspeed-ulysses --cp "$cp" --dtype "$dtype"
        judge 0 "$dir"
        keep_result "$backend" "$case-$dtype-cp$cp"
        grep -q "# layout: contiguous (cp $cp" "$work/judge.out" ||
            fail "$case $dtype cp $cp: the layout is not named contiguous"
        grep -q "framework deepspeed $deepspeed_version" "$work/judge.out" ||
            fail "$case $dtype cp $cp: the dump does not name deepspeed $deepspeed_version"
        [ "$cp" != 1 ] && [ -d "$work/cp1_$dtype" ] &&
            judge 0 "$dir" --baseline "$work/cp1_$dtype/rank_0.h5"
        runs=$((runs + 1))
        echo "PASS $case $dtype deepspeed-ulysses cp $cp"
    done
    rm -rf "$work"/cp1_*
done

# A planted bug at cp 2, where documents cross the shard boundary: exit 1, tensor and rank named
export_case packed-documents-spanning-ranks-with-length-1
expected="FAIL logits rank 1"
run "$work/wrong" --attention deepspeed-ulysses --cp 2 --wrong mask-from-local-positions
judge 1 "$work/wrong"
grep -q "$expected" "$work/judge.out" ||
    fail "--wrong mask-from-local-positions: the output does not say '$expected'"
echo "FAIL as expected: deepspeed-ulysses --wrong mask-from-local-positions:" \
    "$(grep -m1 "$expected" "$work/judge.out" | cut -c1-100)"
echo "DeepSpeed $deepspeed_version Ulysses: $runs runs judged PASS, 1 planted bug judged FAIL"
exit 0
