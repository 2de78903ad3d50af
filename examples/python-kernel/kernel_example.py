"""What the kernels of examples/python-kernel share: their command line, the import of
python/cpparity_kernel.py, the masks of the planted bugs and GQA's sharing of key/value heads.

Every kernel script runs as

    python3 SCRIPT.py EXPORT.h5 -o DUMP.h5 [--wrong NAME] [--device cpu|cuda]

EXPORT.h5 from `cpparity export SUITE.yaml` (attention-level cases), DUMP.h5 for
`cpparity judge EXPORT.h5 DUMP.h5`. The layouts are the C ABI's: q, out, dq, dout [B, S, H, Dh];
k, v, dk, dv [B, S, Hkv, Dh]; lse [B, H, S]; query head j reads key/value head j // (H // Hkv).
"""

import argparse
import copy
import os
import sys

__all__ = ["cpparity_kernel", "parse_arguments", "write_autograd_dump", "layer_with",
           "expand_kv_heads", "sum_kv_heads"]

HERE = os.path.dirname(os.path.abspath(__file__))
try:  # the package installed into this python (pip install ./python)
    import cpparity_kernel
except ImportError:  # else the package's folder of this clone, so that the examples run from it
    sys.path.append(os.path.join(HERE, "..", "..", "python"))
    import cpparity_kernel


def parse_arguments(description, wrong_variants):
    """EXPORT.h5, -o DUMP.h5, --wrong (one of wrong_variants, or None: the right kernel) and
    --device."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("export", help="an attention-level export (cpparity export SUITE.yaml)")
    parser.add_argument("-o", "--out", required=True,
                        help="the kernel dump to write (never overwritten)")
    parser.add_argument("--wrong", choices=wrong_variants,
                        help="plant a bug (README.md): the judge must find it")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the kernel runs (default cpu); its outputs come back to "
                             "the host for the dump")
    return parser.parse_args()


def write_autograd_dump(args, kernel, run_layer, refused=()):
    """The dump (args.out) of a kernel on every layer of args.export whose backward is autograd's
    (it takes no out and lse) and which has no block calls: run_layer(case, layer) gives out,
    lse, dq, dk, dv. A layer whose run raises one of the exception types refused is written
    unsupported, with the exception's first line (NOT CLAIMED); anything else stops the dump."""
    import torch

    export = cpparity_kernel.read_attention_export(args.export)
    name = kernel + (f"-wrong-{args.wrong}" if args.wrong else "")
    with cpparity_kernel.KernelDumpWriter(
            args.out, export, kernel=name, kernel_version=str(torch.__version__),
            framework="torch", framework_version=str(torch.__version__), deterministic=False,
            block_calls=False, backward_uses_out_lse=False) as dump:
        for case in export.cases:
            for layer in case.layers:
                try:
                    outputs = run_layer(case, layer)
                except refused as refusal:
                    dump.unsupported(case, layer, f"{name}: {str(refusal).splitlines()[0][:300]}")
                    continue
                dump.write_layer(case, layer, *outputs)
    print(f"wrote {args.out}: {name}, {len(export.cases)} cases")


def layer_with(layer, **rule):
    """A copy of the layer with another mask rule (layer_type, window, chunk_size or
    chunk_origin): its allowed() and mask_mod() are the mask a kernel with that rule computes.
    How the planted bugs get their masks."""
    changed = copy.copy(layer)
    for name, value in rule.items():
        setattr(changed, name, value)
    return changed


def expand_kv_heads(x, heads):
    """[B, S, Hkv, Dh] -> [B, S, H, Dh]: key/value head j // (H // Hkv) at query head j."""
    return x.repeat_interleave(heads // x.shape[2], dim=2)


def sum_kv_heads(x, kv_heads):
    """[B, S, H, Dh] -> [B, S, Hkv, Dh]: the gradient of a key/value head is the sum over the
    query heads that read it."""
    batch, seq_len, heads, head_dim = x.shape
    return x.reshape(batch, seq_len, kv_heads, heads // kv_heads, head_dim).sum(dim=3)
