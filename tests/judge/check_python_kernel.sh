#!/usr/bin/env bash
# check_python_kernel.sh CPPARITY SOURCE_DIR [PYTHON] — an attention kernel written in Python
# judged through a kernel dump (docs/dump-format.md, "The kernel dump"):
# examples/python-kernel/torch_kernel.py, plain PyTorch with an explicit forward and backward,
# block calls and a determinism claim, run by Debian's python3 (torch 1.13; PYTHON overrides),
# reading the export and writing the dump with python/cpparity_kernel.py.
#   - PASS on cases/kernels.yaml, on `export --random 50 --seed 7` and on cases of
#     cases/kernels-sweep.yaml (tile edges, MQA, document chunks, S = 641);
#   - each planted bug judged FAIL with its verdict and a failing element named by layer, batch
#     row, position and head: window-off-by-one (forward and backward wrong), lse-log2 (forward
#     wrong, backward right given the reference's out and lse), backward-no-rowsum (backward
#     wrong, forward right), chunk-origin-local (whole-sequence calls right, block calls wrong),
#     masked-row-finite-lse (fully masked rows with lse other than -inf), not-deterministic
#     (a second call changes the result);
#   - the dump of one export refused (exit 2) against another export of the same suite whose
#     inputs come from another --seed;
#   - cpparity_kernel.KernelDumpWriter refusing what breaks the contract: an existing path, a
#     layer left unwritten, a promise (deterministic) without its outputs.
# Exit 0 when all of that holds, 1 at the first surprise, 77 (skip) when PYTHON lacks torch,
# numpy or h5py. About a minute on two cores.
set -euo pipefail
cpparity=$1
source_dir=$2
python=${3:-/usr/bin/python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/cpparity-python-kernel.XXXXXX")
trap 'rm -rf "$work"' EXIT
source "$source_dir/tests/judge/example_steps.sh" # fail, skip
source "$source_dir/tests/judge/python_kernel_steps.sh" # exported, dumped, judged, passes, planted

"$python" -c 'import torch, numpy, h5py' > "$work/probe.out" 2>&1 ||
    skip "$python cannot import torch, numpy and h5py:" "$work/probe.out"

exported kernels "$source_dir/cases/kernels.yaml"
passes torch_kernel.py kernels
cp "$work/dump.h5" "$work/kernels-dump.h5"
# the planted bugs on the cases that show each of them (every layer type on a prime length, a
# fully masked row, mixed masks, block edges on document boundaries): a fifth of the time
exported planted "$source_dir/cases/kernels.yaml" --case prime-length-37 --case all-padding-row \
    --case every-mask-on-a-mixed-batch --case block-edges-on-document-boundaries
planted torch_kernel.py planted window-off-by-one \
    "forward wrong, backward wrong (it fails given the reference's out and lse too)"
planted torch_kernel.py planted lse-log2 \
    "forward wrong (backward right given the reference's out and lse)"
planted torch_kernel.py planted backward-no-rowsum \
    "backward wrong (forward right; backward fails given the reference's out and lse)"
planted torch_kernel.py planted chunk-origin-local \
    "whole-sequence calls right; block calls: forward_block and backward_block wrong"
planted torch_kernel.py planted masked-row-finite-lse "fully masked rows have lse other than -inf"
planted torch_kernel.py planted not-deterministic \
    "not deterministic (a second call changes the result)"

exported random --random 50 --seed 7
passes torch_kernel.py random
exported sweep "$source_dir/cases/kernels-sweep.yaml" --case edges.33.g1 --case edges.66.g2 \
    --case edges.513.g8 --case edges-document-chunks.130
passes torch_kernel.py sweep

exported reseeded "$source_dir/cases/kernels.yaml" --seed 5
judged 2 "$work/reseeded.h5" "$work/kernels-dump.h5"
grep -q "a dump of another export" "$work/judge.out" ||
    fail "the dump of another export: refused without saying so"
[ ! -e "$work/judged.h5" ] || fail "the dump of another export: a results file was written"
echo "refused, a dump of another export (--seed 5): $(head -1 "$work/judge.out" | cut -c1-120)"

PYTHONPATH="$source_dir/python" "$python" - "$work/kernels.h5" "$work" > "$work/writer.out" 2>&1 \
    <<'PYTHON' || fail "KernelDumpWriter's refusals"
import os, sys
import cpparity_kernel

export = cpparity_kernel.read_attention_export(sys.argv[1])
folder = sys.argv[2]
options = dict(kernel="k", kernel_version="1", framework="f", framework_version="1")


def refused(error, what, make):
    try:
        make()
    except error as raised:
        print(f"refused, {what}: {raised}"[:160])
        return
    sys.exit(f"not refused: {what}")


refused(FileExistsError, "an existing path",
        lambda: cpparity_kernel.KernelDumpWriter(sys.argv[1], export, **options))
path = os.path.join(folder, "partial.h5")


def one_layer_short():
    with cpparity_kernel.KernelDumpWriter(path, export, **options) as dump:
        for case in export.cases:
            for layer in case.layers[1:] if case is export.cases[-1] else case.layers:
                dump.unsupported(case, layer, "not claimed")


refused(ValueError, "a layer left unwritten", one_layer_short)
if os.path.exists(path) or [name for name in os.listdir(folder) if "partial" in name]:
    sys.exit("a refused dump left a file behind")


def deterministic_without_again():
    with cpparity_kernel.KernelDumpWriter(path, export, deterministic=True,
                                          backward_uses_out_lse=False, **options) as dump:
        case = export.cases[0]
        layer = case.layers[0]
        dump.write_layer(case, layer, layer.given_out, layer.given_lse, layer.q, layer.k,
                         layer.v)


refused(ValueError, "deterministic without again", deterministic_without_again)
if os.path.exists(path):
    sys.exit("a refused dump left a file behind")
PYTHON
cat "$work/writer.out"
echo "PASS"
