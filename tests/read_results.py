#!/usr/bin/env python3
"""Reads a `cpparity run` results file with h5py, the way docs/results-file.md tells users to,
and checks what a reader needs: provenance, the summary, every case and run with its metrics
table (tolerance, origin, verdict per tensor and rank), and the tensors --store kept.

usage: read_results.py RESULTS.h5 --stored none|all [--compiler NAME]
  none: passing runs keep no tensors (--store failures or metrics)
  all:  every compared tensor is stored with its float64 reference (--store all)
  --compiler: /provenance/compiler must name this compiler (CMake's compiler id: GNU, Clang)
Exit 0 when everything checks out."""
import argparse
import sys

import h5py


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("results")
    parser.add_argument("--stored", choices=("none", "all"), required=True)
    parser.add_argument("--compiler")
    arguments = parser.parse_args()
    runs = 0
    with h5py.File(arguments.results, "r") as results:
        assert text(results.attrs["format"]) == "cpparity-results"
        assert int(results.attrs["format_version"]) == 2
        provenance = results["provenance"].attrs
        for key in ("version", "git_commit", "compiler", "command_line", "comm", "device",
                    "implementation", "kernel", "fault", "start_time", "end_time"):
            assert key in provenance, f"provenance lacks {key}"
        if arguments.compiler:
            compiler = text(provenance["compiler"])
            expected = {"GNU": "gcc", "Clang": "clang"}.get(arguments.compiler,
                                                             arguments.compiler.lower())
            assert compiler.split()[0] == expected, \
                f"provenance/compiler is {compiler!r}, built with {arguments.compiler}"
        # on more than one rank that is a process (not local ranks) the model-level cases'
        # references are computed by every rank together before the items, and the file says
        # how long that took
        spread = float(provenance["reference_spread_seconds"])
        spreads = int(provenance["ranks"]) > 1 and text(provenance["comm"]) != "local"
        assert spread > 0 if spreads else spread == 0, \
            f"reference_spread_seconds {spread} on {int(provenance['ranks'])} " \
            f"{text(provenance['comm'])} ranks"
        summary = results["summary"].attrs
        assert int(summary["failed"]) == 0 and int(summary["passed"]) > 0
        for case_name, case in results["cases"].items():
            for dtype in (group for group in case.values() if isinstance(group, h5py.Group)):
                for run_name, run in dtype.items():
                    if text(run.attrs["outcome"]) != "PASS":
                        continue
                    where = f"{case_name}/{run_name}"
                    # the item's wall time on its root covers the reference (or, spread before
                    # the items, the naive baseline), which ran there on a thread of its own
                    # alongside the implementation
                    wall = float(run.attrs["wall_seconds"])
                    assert wall > 0 and wall >= float(run.attrs["reference_seconds"]), where
                    metrics = run["metrics"][()]
                    assert len(metrics) == int(run.attrs["tensors_expected"]), where
                    assert all(metrics["passed"]), where
                    assert set(metrics["ratio_origin"]) <= {b"default", b"suite", b"case"}
                    # the naive baseline's error is behind every limit; the cp = 1 error only
                    # behind cp > 1 runs (format version 2)
                    assert (metrics["limit"] == metrics["ratio"] * metrics["baseline_error"]
                            + metrics["floor"]).all(), where
                    cp1 = metrics["cp1_error"]
                    if run_name == "cp_1":
                        assert all(c != c for c in cp1), f"{where}: cp1_error at cp 1"
                    else:
                        assert all(c == c for c in cp1), f"{where}: cp1_error missing"
                    stored = len(run["tensors"])
                    expected = 2 * len(metrics) if arguments.stored == "all" else 0
                    assert stored == expected, f"{where}: {stored} stored, expected {expected}"
                    runs += 1
        if "discrimination" in results and "sliding-w16-equals-s" in results["cases"]:
            # the CI suite: a case with W = S cannot tell its window being dropped, while the
            # case whose padding shares documents can tell padding being dropped
            records = {(text(r["case"]), text(r["feature"])): r
                       for r in results["discrimination"][()]}
            assert not records[("sliding-w16-equals-s", "window")]["discriminating"]
            padding = records[("padding-positions-continue-left-and-right", "padding")]
            assert padding["discriminating"] and padding["change"] > padding["threshold"]
            assert records[("sliding-w5-odd-crossing-shards", "window")]["discriminating"]
    assert runs > 0, "no passing run found"
    print(f"read_results: {arguments.results}: {runs} passing runs with complete metrics, "
          f"stored tensors as --store {arguments.stored} says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
