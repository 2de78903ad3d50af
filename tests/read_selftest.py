#!/usr/bin/env python3
"""Reads a `cpparity selftest` results file with h5py as docs/results-file.md describes and
checks the self-test's own verdict against its matrix: every fault that could be planted was
caught by at least `minimum_cases` cases (the caught and ratio matrices agree with the fault
rows), the clean run and every seed passed, and the clean run is a complete results file.

usage: read_selftest.py SELFTEST.h5 --seeds N
Exit 0 when everything checks out."""
import argparse
import math

import h5py
import numpy


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("results")
    parser.add_argument("--seeds", type=int, required=True)
    arguments = parser.parse_args()
    with h5py.File(arguments.results, "r") as results:
        assert text(results.attrs["format"]) == "cpparity-results"
        assert text(results["provenance"].attrs["fault"]) == "none", "the clean run is recorded"
        summary = results["summary"].attrs
        assert int(summary["failed"]) == 0 and int(summary["errors"]) == 0, dict(summary)
        assert int(summary["passed"]) > 0
        selftest = results["selftest"]
        attributes = selftest.attrs
        assert int(attributes["passed"]) == 1
        minimum = int(attributes["minimum_cases"])
        assert minimum >= 2
        assert int(attributes["clean_failures"]) == 0
        assert int(attributes["false_alarms"]) == 0
        assert 0.0 < float(attributes["clean_worst_ratio"]) < 1.0
        cases = [text(name) for name in selftest["cases"][:]]
        faults = selftest["faults"][:]
        caught = selftest["caught"][:]
        ratio = selftest["ratio"][:]
        how = selftest["how"][:]
        assert caught.shape == ratio.shape == how.shape == (len(faults), len(cases))
        assert len(faults) >= 22, "every class of docs/bug-classes.md is planted"
        smallest = math.inf
        for row, fault in enumerate(faults):
            name = text(fault["fault"])
            if not fault["applicable"]:
                assert text(fault["note"]), f"{name}: not planted without a reason"
                continue
            count = int(caught[row].sum())
            assert count == int(fault["cases_caught"]), name
            assert count >= minimum, f"{name} caught by {count} cases"
            assert numpy.all(ratio[row][caught[row] == 1] > 1.0), f"{name}: a catch below 1"
            assert numpy.all(numpy.isnan(ratio[row][caught[row] == 0])), name
            assert all(text(how[row][c]) for c in numpy.flatnonzero(caught[row])), name
            second = sorted(ratio[row][caught[row] == 1])[-2]
            assert second == float(fault["detection_ratio"]), name
            smallest = min(smallest, second)
        assert smallest == float(attributes["smallest_detection_ratio"])
        seeds = selftest["seeds"][:]
        assert len(seeds) == arguments.seeds
        assert sorted(int(seed) for seed in seeds["seed"]) == list(range(1, arguments.seeds + 1))
        assert numpy.all(seeds["failures"] == 0)
        assert numpy.all(seeds["worst_ratio"] < 1.0)
    print(f"{arguments.results}: {len(faults)} faults x {len(cases)} cases, smallest detection "
          f"ratio {smallest:.3g}, {arguments.seeds} seeds without a false alarm")


if __name__ == "__main__":
    main()
