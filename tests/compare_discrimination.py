#!/usr/bin/env python3
"""Checks that the discrimination records of several `cpparity run` results files of the same
suite agree: the threshold of each (case, feature) is a function of the case alone, so runs at
different rank counts (which leave different cp sizes NOT RUN) must report the same thresholds,
changes and verdicts.

usage: compare_discrimination.py RESULTS.h5 RESULTS.h5 [...]
Exit 0 when every file holds the same records."""
import sys

import h5py


def records(path):
    with h5py.File(path, "r") as results:
        rows = results["discrimination"][()]
        return {(row["case"].decode(), row["feature"].decode()):
                (float(row["threshold"]), float(row["change"]), bool(row["discriminating"]))
                for row in rows}


def main(paths):
    if len(paths) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    first = records(paths[0])
    assert first, f"{paths[0]}: no discrimination records"
    for path in paths[1:]:
        other = records(path)
        assert other.keys() == first.keys(), \
            f"{path}: records for {sorted(other.keys() ^ first.keys())} differ from {paths[0]}"
        for key, value in first.items():
            assert other[key] == value, f"{key}: {paths[0]} has {value}, {path} has {other[key]}"
    print(f"compare_discrimination: {len(first)} records identical in {len(paths)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
