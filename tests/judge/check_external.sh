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
# Then, for either, the pytest file tests/python/test_deepspeed_ulysses.py on cpparity's plugin
# (its docstring says what it runs; pytest is Debian's python3-pytest through the venv's system
# site packages, or the PyTorch 2 environment's pinned one): two CI cases (with --torch2 five) at
# cp 1, 2 and 4 in f32, each cp > 1 also against the cp 1 run, bf16 at cp 2, every run judged
# PASS with the layout contiguous and DeepSpeed's pinned version named, each results file kept for
# the parity matrix (deepspeed-ulysses-<version>) when $CPPARITY_MATRIX_RESULTS is set; a planted
# bug (--wrong mask-from-local-positions) at cp 2 judged FAIL naming the logits of rank 1.
# Exit 0 when every test passes (8; with --torch2 17), 1 otherwise, 77 (skip) when the venv
# cannot be made, pip cannot install DeepSpeed (no network, say), or DeepSpeed or pytest cannot be
# imported or a gloo process group cannot start.
set -u
cpparity=$1
source_dir=$2
venv=$3
base_python=${4:-/usr/bin/python3}
work=$(mktemp -d /tmp/cpparity-external-XXXXXX)
trap 'rm -rf "$work"' EXIT
source "$source_dir/tests/judge/example_steps.sh" # fail, skip, torch2_python, gloo_works, pytest_file

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
# torch 1.13's: 2 cases at cp 1, 2, 4, bf16, the planted bug; torch 2's: 3 cases more
expected_tests=8
[ "$venv" = --torch2 ] && expected_tests=17

# DeepSpeed importable on CPU, and a gloo process group
if ! DS_ACCELERATOR=cpu gloo_works "import deepspeed
from deepspeed.sequence.layer import DistributedAttention
import pytest"; then
    skip "DeepSpeed $deepspeed_version on CPU, pytest or a gloo group is unavailable to $python:" \
        "$work/probe.out"
fi

pytest_file "$source_dir/tests/python/test_deepspeed_ulysses.py" "$expected_tests"
exit 0
