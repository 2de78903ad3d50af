#!/usr/bin/env python3
"""Checks that two runs of the same cases gave the same bits: every tensor the implementation
produced (stored with --store all) is identical in both results files, loss, logits and every
gradient, item by item. Used by scripts/device-check.sh for the GPU path's determinism.

usage: compare_runs_bitwise.py FIRST.h5 SECOND.h5
Exit 0 when every stored tensor matches bit for bit (and there is at least one), 1 otherwise."""
import sys

import h5py
import numpy


def tensors(path):
    found = {}
    with h5py.File(path, "r") as results:
        def visit(name, item):
            if (isinstance(item, h5py.Dataset) and "/tensors/" in name
                    and not name.endswith(".reference")):
                found[name] = item[()]
        results["cases"].visititems(visit)
    return found


def main():
    first, second = tensors(sys.argv[1]), tensors(sys.argv[2])
    if not first or first.keys() != second.keys():
        print(f"different or no stored tensors: {len(first)} and {len(second)}")
        return 1
    differing = [name for name in first
                 if first[name].tobytes() != second[name].tobytes()]
    for name in differing[:10]:
        a, b = numpy.asarray(first[name]), numpy.asarray(second[name])
        print(f"differs: {name}: max |a - b| = {numpy.max(numpy.abs(a - b)):.3e}")
    print(f"{len(first) - len(differing)} of {len(first)} tensors bit-identical")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
