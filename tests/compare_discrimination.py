#!/usr/bin/env python3
"""Checks that the discrimination records of several `cpparity run` results files of the same
suite agree: the threshold of each (case, feature) is a function of the case alone, so runs at
different rank counts (which leave different cp sizes NOT RUN) must report the same thresholds,
changes and verdicts. So must the naive baseline's error (and so the limit) of every tensor of
every item all the files ran, and each logits position's own limit (profiles/limits@rank<r>): the baseline is spread over the ranks of an MPI run
(naive_model_run_spread) and computed alone by one process, the same bits either way.

usage: compare_discrimination.py RESULTS.h5 RESULTS.h5 [...]
Exit 0 when every file holds the same records and baseline errors."""
import sys

import h5py


def records(path):
    with h5py.File(path, "r") as results:
        rows = results["discrimination"][()]
        return {(row["case"].decode(), row["feature"].decode()):
                (float(row["threshold"]), float(row["change"]), bool(row["discriminating"]))
                for row in rows}


def baseline_errors(path):
    """(metrics table, tensor, kind, rank) -> the bytes of its baseline error and limit."""
    found = {}
    with h5py.File(path, "r") as results:
        def visit(name, item):
            if isinstance(item, h5py.Dataset) and name.endswith("/metrics"):
                for row in item[()]:
                    key = (name, row["tensor"].decode(), row["kind"], int(row["rank"]))
                    found[key] = (row["baseline_error"].tobytes(), row["limit"].tobytes())
            # each position's own limit (the per-position rule), from the same baseline errors:
            # keyed by its item's metrics table, as the tensors are, so that the same items of
            # every file are compared
            base = name.rsplit("/", 1)
            if isinstance(item, h5py.Dataset) and "/profiles/limits@rank" in name:
                key = (base[0].rsplit("/profiles", 1)[0] + "/metrics", base[1], -1, -1)
                found[key] = (item[()].tobytes(), b"")
        results["cases"].visititems(visit)
    return found


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
    # the items every file ran (a run at fewer ranks leaves larger cp sizes out): at least one
    every = [baseline_errors(path) for path in paths]
    tables = set.intersection(*({key[0] for key in errors} for errors in every))
    assert tables, f"no item's metrics are in every one of {paths}"
    shared = {key: value for key, value in every[0].items() if key[0] in tables}
    for path, errors in zip(paths[1:], every[1:]):
        other = {key: value for key, value in errors.items() if key[0] in tables}
        assert other.keys() == shared.keys(), \
            f"{path}: tensors {sorted(other.keys() ^ shared.keys())[:5]} differ"
        for key, value in shared.items():
            assert other[key] == value, f"{key}: baseline error and limit differ in {path}"
    limits = sum(1 for key in shared if key[2] == -1)
    assert limits > 0, "no item every file ran has per-position limits (profiles/limits@rank<r>)"
    print(f"compare_discrimination: {len(first)} records and the baseline errors of "
          f"{len(shared) - limits} tensors and {limits} per-position limit profiles of "
          f"{len(tables)} items identical in {len(paths)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
