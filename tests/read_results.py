#!/usr/bin/env python3
"""Reads a `cpparity run` results file with h5py, the way docs/results-file.md tells users to,
and checks that what a reader needs is there: provenance, the summary, every case and run with
its metrics table (tolerance, origin, verdict per tensor and rank). Exit 0 when readable."""
import sys

import h5py


def main(path):
    with h5py.File(path, "r") as results:
        assert results.attrs["format"] in (b"cpparity-results", "cpparity-results")
        provenance = results["provenance"].attrs
        for key in ("version", "git_commit", "command_line", "comm", "start_time", "end_time"):
            assert key in provenance, f"provenance lacks {key}"
        summary = results["summary"].attrs
        assert int(summary["failed"]) == 0 and int(summary["passed"]) > 0
        runs = 0
        for case_name, case in results["cases"].items():
            dtypes = [group for group in case.values() if isinstance(group, h5py.Group)]
            for dtype in dtypes:
                for run_name, run in dtype.items():
                    metrics = run["metrics"][()]
                    outcome = run.attrs["outcome"]
                    outcome = outcome.decode() if isinstance(outcome, bytes) else outcome
                    if outcome == "PASS":
                        assert len(metrics) == int(run.attrs["tensors_expected"]), (
                            case_name, run_name)
                        assert all(metrics["passed"]), (case_name, run_name)
                        assert set(metrics["ratio_origin"]) <= {b"default", b"suite", b"case"}
                        runs += 1
        assert runs > 0, "no passing run found"
    print(f"read_results: {path}: {runs} passing runs with complete metrics")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
