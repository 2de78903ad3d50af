#!/usr/bin/env bash
# check_python_kernel_torch2.sh CPPARITY SOURCE_DIR — PyTorch 2's own attention kernels judged
# through a kernel dump (docs/dump-format.md, "The kernel dump"), in the pinned PyTorch 2
# environment (scripts/torch2-env.sh), on the CPU:
#   - sdpa_math.py: scaled_dot_product_attention under the math backend, dense boolean mask,
#     enable_gqa, lse from the same masked scores, autograd's backward;
#   - flex_attention.py: flex_attention (uncompiled) with cpparity_kernel's mask_mod and a
#     BlockMask from create_block_mask, the lse it returns, autograd's backward (the CPU
#     workaround of examples/torch-cp);
# each PASS on cases/kernels.yaml, on `export --random 50 --seed 7` and on cases of
# cases/kernels-sweep.yaml, and each planted bug judged FAIL with its verdict and a failing
# element named by layer, batch row, position and head: sdpa_math window-off-by-one (forward and
# backward wrong), flex_attention chunk-origin-local (chunks counted from index 0: forward and
# backward wrong) and lse-log2 (forward wrong, backward right). Exit 0 when all of that holds, 1
# at the first surprise, 77 (skip) when the PyTorch 2 environment cannot be made. About 2
# minutes on two cores (flex_attention, uncompiled, is the slow one).
set -euo pipefail
cpparity=$1
source_dir=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/cpparity-python-kernel-torch2.XXXXXX")
trap 'rm -rf "$work"' EXIT
source "$source_dir/tests/judge/example_steps.sh" # fail, skip, torch2_python
source "$source_dir/tests/judge/python_kernel_steps.sh" # exported, dumped, judged, passes, planted

torch2_python
version=$("$python" -c 'import torch; print(torch.__version__)') ||
    fail "$python cannot print torch's version"

exported kernels "$source_dir/cases/kernels.yaml"
exported random --random 50 --seed 7
exported sweep "$source_dir/cases/kernels-sweep.yaml" --case edges.33.g1 --case edges.66.g2 \
    --case edges.513.g8 --case edges-document-chunks.130
for script in sdpa_math.py flex_attention.py; do
    for name in kernels random sweep; do
        passes "$script" "$name"
    done
    grep -q "from torch $version" "$work/judge.out" ||
        fail "$script: the dump does not name torch $version"
done
# the planted bugs on the cases that show each of them (every layer type on a prime length, a
# fully masked row, mixed masks, block edges on document boundaries)
exported planted "$source_dir/cases/kernels.yaml" --case prime-length-37 --case all-padding-row \
    --case every-mask-on-a-mixed-batch --case block-edges-on-document-boundaries
planted sdpa_math.py planted window-off-by-one \
    "forward wrong, backward wrong (it fails given the reference's out and lse too)"
planted flex_attention.py planted chunk-origin-local \
    "forward wrong, backward wrong (it fails given the reference's out and lse too)"
planted flex_attention.py planted lse-log2 \
    "forward wrong (backward right given the reference's out and lse)"
echo "PASS (torch $version)"
