#!/usr/bin/python3
"""PyTorch's side of `make bench`: dense masked attention, forward and backward by autograd.

The same shapes, masks and JSON lines as `cpparity bench reference --json` (docs/benchmarks.md):
float64 on the CPU with torch.set_num_threads(N), B = 1, H = Hkv. PyTorch computes every pair of
the S x S score matrix and masks it afterwards, which is what a dense implementation pays; the
GFLOP/s are nevertheless counted on the allowed pairs only (14 * Dh flops per allowed pair and
head), as the reference's are, so the two rates compare the same work.

Run with Debian's interpreter (/usr/bin/python3 sees python3-torch), e.g.
    /usr/bin/python3 bench/torch_reference.py --threads 2 --seq-len 4096
"""

import argparse
import json
import math
import sys
import time

import torch

MASKS = ("causal", "sliding", "chunked", "packed")


def allowed_pairs(kind, seq_len, window, chunk, documents):
    """The S x S boolean mask of docs/masks.md for one row without padding (q rows, k columns)."""
    q = torch.arange(seq_len).unsqueeze(1)
    k = torch.arange(seq_len).unsqueeze(0)
    allowed = k <= q
    if kind == "sliding":
        allowed &= k > q - window
    elif kind == "chunked":
        allowed &= torch.div(k, chunk, rounding_mode="floor") == torch.div(
            q, chunk, rounding_mode="floor")
    elif kind == "packed":
        length = -(-seq_len // documents)  # the C benchmark's ceil(S / documents)
        allowed &= torch.div(k, length, rounding_mode="floor") == torch.div(
            q, length, rounding_mode="floor")
    return allowed


def uniform(shape, stream):
    """Inputs of the same distribution as the C side (uniform in [-1, 1)); values differ."""
    generator = torch.Generator().manual_seed(1000 + stream)
    return torch.rand(shape, generator=generator, dtype=torch.float64) * 2.0 - 1.0


def bench_one(kind, seq_len, args):
    heads, head_dim = args.heads, args.head_dim
    allowed = allowed_pairs(kind, seq_len, args.window, args.chunk, args.documents)
    shape = (1, heads, seq_len, head_dim)
    q = uniform(shape, 1).requires_grad_()
    k = uniform(shape, 2).requires_grad_()
    v = uniform(shape, 3).requires_grad_()
    dout = uniform(shape, 4)
    scale = 1.0 / math.sqrt(head_dim)

    start, cpu_start = time.perf_counter(), time.process_time()
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    scores = scores.masked_fill(~allowed, float("-inf"))
    out = torch.matmul(torch.softmax(scores, dim=-1), v)
    middle = time.perf_counter()
    torch.autograd.grad(out, (q, k, v), grad_outputs=dout)
    end, cpu_end = time.perf_counter(), time.process_time()

    pairs = float(allowed.sum().item()) * heads
    seconds = end - start
    return {
        "what": "attention",
        "mask": kind,
        "batch": 1,
        "seq": seq_len,
        "heads": heads,
        "head_dim": head_dim,
        "threads": args.threads,
        "seconds": round(seconds, 6),
        "gflops": round(14.0 * head_dim * pairs / seconds * 1e-9, 3),
        "cpu_seconds": round(cpu_end - cpu_start, 6),
        "allowed_pairs": int(pairs),
        "forward_seconds": round(middle - start, 6),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, action="append", dest="lengths")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--mask", choices=MASKS, action="append", dest="masks")
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--chunk", type=int, default=512)
    parser.add_argument("--documents", type=int, default=8)
    parser.add_argument("--max-dense-gib", type=float, default=8.0,
                        help="skip lengths whose B x H x S x S scores exceed this (default 8)")
    parser.add_argument("--json", action="store_true",
                        help="accepted for symmetry with cpparity; the output is always JSON")
    args = parser.parse_args()
    for name in ("heads", "head_dim", "threads", "window", "chunk", "documents"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    torch.set_num_threads(args.threads)
    bench_one("causal", 128, args)  # warm-up: the first matmul pays for PyTorch's set-up
    for seq_len in args.lengths or [1024, 4096]:
        # about five dense S x S float64 tensors live at once (scores, masked, softmax, grads)
        dense_gib = 5 * args.heads * seq_len * seq_len * 8 / 2**30
        if dense_gib > args.max_dense_gib:
            print(f"torch_reference.py: S={seq_len} skipped: dense attention needs about "
                  f"{dense_gib:.1f} GiB (--max-dense-gib {args.max_dense_gib})", file=sys.stderr)
            continue
        for kind in MASKS:
            if args.masks is None or kind in args.masks:
                print(json.dumps(bench_one(kind, seq_len, args)), flush=True)


if __name__ == "__main__":
    main()
