#!/usr/bin/python3
"""cp_layouts.py CPPARITY [RANKS] [--suite YAML] [--device cuda] — the implementation's time per
step and the work balance of each context-parallel algorithm and layout, measured in one run.

Runs `CPPARITY run bench/cp-layouts.yaml --comm local --ranks RANKS` (default 4; --suite another
file of one case at cp 4, such as bench/cp-layouts-16k.yaml, S = 16384, which the device check
runs with --device cuda) into a temporary results file and prints, for each item: the implementation's seconds for one step (create, load,
forward and backward, the slowest rank), its ratio to contiguous Ulysses in the same run, and the
work balance across ranks — the allowed (query, key) pairs each rank's attention computes, max /
mean. Ulysses gives every rank all tokens of H/cp heads, so its balance is 1 whatever the layout;
ring gives each rank its own queries against every key, so the layout decides; a hybrid U×R gives
each rank its Ulysses group's queries for H/U heads. The pairs are counted from the layout's
definition (cases/README.md, "Layouts and algorithms") for the case's causal single-document
rows; on a machine with fewer cores than ranks the seconds hide the imbalance the pairs show.
"""

import os
import subprocess
import sys
import tempfile

import h5py

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITE = os.path.join(SOURCE, "bench", "cp-layouts.yaml")


def positions(layout, sequence, cp, rank):
    """The global positions rank holds (cases/README.md), sequence a multiple of 2·cp."""
    length = sequence // cp
    if layout == "zigzag":
        half = length // 2
        return [rank * half + t for t in range(half)] + [
            (2 * cp - 1 - rank) * half + t for t in range(half)]
    if layout == "round-robin":
        return [t * cp + rank for t in range(length)]
    return [rank * length + t for t in range(length)]


def balance(algorithm, layout, sequence, cp):
    """Max / mean over ranks of the causal pairs a rank's attention computes."""
    if algorithm == "ulysses":
        return 1.0
    group = int(algorithm.split(":")[1].split("x")[0]) if algorithm.startswith("hybrid:") else 1
    work = []
    for rank in range(cp):
        first = rank - rank % group  # the rank's Ulysses group (itself for ring)
        queries = [p for member in range(first, first + group)
                   for p in positions(layout, sequence, cp, member)]
        work.append(sum(p + 1 for p in queries) / group)  # causal: query p sees p + 1 keys
    return max(work) / (sum(work) / len(work))


def option(arguments, name, default):
    """The value after --name in arguments (removed from them), else default."""
    if name in arguments:
        at = arguments.index(name)
        if at + 1 >= len(arguments):
            sys.exit(f"cp_layouts.py: {name} needs a value")
        value = arguments[at + 1]
        del arguments[at:at + 2]
        return value
    return default


def main():
    arguments = sys.argv[1:]
    suite = option(arguments, "--suite", SUITE)
    device = option(arguments, "--device", "cpu")
    if not arguments:
        sys.exit(__doc__)
    ranks = arguments[1] if len(arguments) > 1 else "4"
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "cp-layouts.h5")
        subprocess.run([arguments[0], "run", suite, "--device", device, "--comm", "local",
                        "--ranks", ranks, "--out", out], check=True, stdout=subprocess.DEVNULL)
        with h5py.File(out, "r") as results:
            case = next(iter(results["cases"]))  # the suite's one case
            items = results["cases"][case]["f32"]
            rows = []
            for name in items:
                attributes = items[name].attrs
                if int(attributes["cp"]) == 1:
                    continue
                rows.append((attributes["algorithm"].decode(),
                             attributes["token_layout"].decode(),
                             float(attributes["seconds"]), str(attributes["outcome"].decode())))
            sequence = int(results["cases"][case].attrs["seq_len"])
    plain = next(r[2] for r in rows if r[0] == "ulysses" and r[1] == "contiguous")
    print(f"{'algorithm':12s} {'layout':11s} {'seconds':>8s} {'vs ulysses':>10s} "
          f"{'pairs max/mean':>14s} outcome")
    for algorithm, layout, seconds, outcome in rows:
        print(f"{algorithm:12s} {layout:11s} {seconds:8.3f} {seconds / plain:10.2f} "
              f"{balance(algorithm, layout, sequence, 4):14.2f} {outcome}")


if __name__ == "__main__":
    main()
