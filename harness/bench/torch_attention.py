#!/usr/bin/env python3
"""PyTorch's attention on the shapes of cpparity-bench-attention, in the same run, and the ratio.

usage: torch_attention.py [--ours OURS.jsonl] [--seq-lens 4096,16384] [--heads 16]
                          [--head-dim 128] [--window 1024] [--chunk 2048] [--documents 16]
                          [--repeats 5] [--json OUT.jsonl]

For each sequence length and mask (causal, sliding, chunked, packed), bf16, B = 1, it times the
forward and the forward+backward of PyTorch: scaled_dot_product_attention(is_causal=True) for
causal, naming the backend that ran (flash, cuDNN, efficient or math, tried in that order), and
flex_attention with a block mask (torch.compile'd) for the others. TFLOP/s count allowed pairs
only, as cpparity-bench-attention does: forward 4 * Dh flops per pair and head, forward+backward
14 * Dh. It prints one JSON object per line and then, with --ours (the JSON lines of
cpparity-bench-attention), a table: ours, PyTorch, ratio ours/PyTorch. Seconds are the median of
--repeats timed calls after warm-up calls."""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F


def allowed_pairs(mask, seq_len, window, chunk, documents):
    """Allowed (query, key) pairs of one row, closed forms of docs/masks.md's predicate."""
    if mask == "causal":
        return seq_len * (seq_len + 1) // 2
    if mask == "sliding":
        return sum(min(q + 1, window) for q in range(seq_len))
    if mask == "chunked":
        return sum(q % chunk + 1 for q in range(seq_len))
    length = -(-seq_len // documents)
    return sum((q % length) + 1 for q in range(seq_len))


def timed(function, repeats):
    """Median seconds of function() over repeats calls, after two warm-up calls."""
    for _ in range(2):
        function()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        function()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop) / 1000.0)
    return statistics.median(times)


def sdpa_causal(q, k, v):
    """SDPA causal with the first backend that runs: (callable, backend name)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for backend, name in ((SDPBackend.FLASH_ATTENTION, "flash"),
                          (SDPBackend.CUDNN_ATTENTION, "cudnn"),
                          (SDPBackend.EFFICIENT_ATTENTION, "efficient"),
                          (SDPBackend.MATH, "math")):
        def run(backend=backend):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        try:
            run()
            return run, "sdpa-" + name
        except RuntimeError:
            continue
    raise RuntimeError("no SDPA backend ran")


def flex(mask, seq_len, window, chunk, documents, q, k, v):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    length = -(-seq_len // documents)
    if mask == "sliding":
        def mask_mod(b, h, qi, ki):
            return (ki <= qi) & (qi - ki < window)
    elif mask == "chunked":
        def mask_mod(b, h, qi, ki):
            return (ki <= qi) & (qi // chunk == ki // chunk)
    else:
        def mask_mod(b, h, qi, ki):
            return (ki <= qi) & (qi // length == ki // length)
    block_mask = create_block_mask(mask_mod, None, None, seq_len, seq_len, device="cuda")
    compiled = torch.compile(flex_attention)
    return (lambda: compiled(q, k, v, block_mask=block_mask)), "flex_attention"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ours")
    parser.add_argument("--seq-lens", default="4096,16384")
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--window", type=int, default=1024)
    parser.add_argument("--chunk", type=int, default=2048)
    parser.add_argument("--documents", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json")
    arguments = parser.parse_args()
    if not torch.cuda.is_available():
        print("torch_attention.py: no CUDA device", file=sys.stderr)
        return 3
    rows = []
    for seq_len in (int(s) for s in arguments.seq_lens.split(",")):
        for mask in ("causal", "sliding", "chunked", "packed"):
            shape = (1, arguments.heads, seq_len, arguments.head_dim)
            q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            grad = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
            try:
                if mask == "causal":
                    forward, implementation = sdpa_causal(q, k, v)
                else:
                    forward, implementation = flex(mask, seq_len, arguments.window,
                                                   arguments.chunk, arguments.documents, q, k, v)
            except Exception as failure:  # a PyTorch without flex_attention, an OOM: say so
                print(f"torch_attention.py: {mask} S={seq_len}: {failure}", file=sys.stderr)
                continue

            def forward_backward():
                out = forward()
                out.backward(grad)

            pairs = allowed_pairs(mask, seq_len, arguments.window, arguments.chunk,
                                  arguments.documents)
            for name, function, per_pair in (("forward", lambda: forward(), 4),
                                             ("forward+backward", forward_backward, 14)):
                with torch.no_grad() if name == "forward" else torch.enable_grad():
                    seconds = timed(function, arguments.repeats)
                flops = per_pair * pairs * arguments.heads * arguments.head_dim
                row = {"what": "attention", "implementation": implementation, "pass": name,
                       "mask": mask, "batch": 1, "seq": seq_len, "heads": arguments.heads,
                       "head_dim": arguments.head_dim, "threads": 0, "allowed_pairs": pairs,
                       "seconds": seconds, "gflops": flops / seconds / 1e9,
                       "tflops": flops / seconds / 1e12}
                rows.append(row)
                print(json.dumps(row), flush=True)
    if arguments.json:
        with open(arguments.json, "w") as out:
            for row in rows:
                out.write(json.dumps(row) + "\n")
    if arguments.ours:
        ours = {}
        with open(arguments.ours) as source:
            for line in source:
                if line.startswith("{"):
                    row = json.loads(line)
                    ours[(row["mask"], row["seq"], row["pass"])] = row
        print(f"\n{'mask':8} {'S':>6} {'pass':17} {'ours TFLOP/s':>12} {'PyTorch':>10} "
              f"{'ratio':>6}  PyTorch implementation")
        for row in rows:
            mine = ours.get((row["mask"], row["seq"], row["pass"]))
            if mine is None:
                continue
            print(f"{row['mask']:8} {row['seq']:6d} {row['pass']:17} {mine['tflops']:12.2f} "
                  f"{row['tflops']:10.2f} {mine['tflops'] / row['tflops']:6.2f}  "
                  f"{row['implementation']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
