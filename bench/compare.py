#!/usr/bin/python3
"""Joins the JSON lines of `cpparity bench reference --json` and bench/torch_reference.py.

    compare.py REFERENCE.jsonl TORCH.jsonl

Prints one row per (mask, S, H, Dh, threads) found in both: each side's seconds and GFLOP/s
(allowed pairs only, docs/benchmarks.md), the speed-up of the reference over PyTorch (PyTorch's
seconds / the reference's) and the reference's share of the same run's dgemm rate.
"""

import json
import sys

KEY = ("what", "mask", "batch", "seq", "heads", "head_dim", "threads")


def read(path):
    with open(path, encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip().startswith("{")]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    reference, torch = read(sys.argv[1]), read(sys.argv[2])
    ceiling = {line["threads"]: line["gflops"] for line in reference if line["what"] == "dgemm"}
    torch_by_key = {tuple(line[k] for k in KEY): line for line in torch}
    print(f"{'mask':8} {'S':>6} {'H':>3} {'Dh':>4} {'thr':>3} {'ref s':>9} {'torch s':>9} "
          f"{'ref GF/s':>9} {'torch GF/s':>10} {'speed-up':>9} {'of dgemm':>9}")
    for line in reference:
        if line["what"] != "attention":
            continue
        other = torch_by_key.get(tuple(line[k] for k in KEY))
        share = line["gflops"] / ceiling[line["threads"]] if line["threads"] in ceiling else None
        print(f"{line['mask']:8} {line['seq']:6} {line['heads']:3} {line['head_dim']:4} "
              f"{line['threads']:3} {line['seconds']:9.3f} "
              f"{other['seconds'] if other else float('nan'):9.3f} {line['gflops']:9.2f} "
              f"{other['gflops'] if other else float('nan'):10.2f} "
              f"{other['seconds'] / line['seconds'] if other else float('nan'):8.1f}x "
              f"{share * 100 if share is not None else float('nan'):8.0f}%")
    for threads, gflops in sorted(ceiling.items()):
        print(f"# dgemm on {threads} thread(s) in the reference's run: {gflops:.2f} GFLOP/s")


if __name__ == "__main__":
    main()
