"""Fixtures of the framework parity tests in this folder (the pytest files on cpparity's plugin
that ctest runs through tests/judge/example_steps.sh's pytest_file):

  run_example(cpparity_case, *arguments)   examples/torch-cp/run.py on the case's export at its
                                           cp size, its dumps in cpparity_case.dumps; run in
                                           this process (torch and the frameworks are imported
                                           once for the session, the ranks are forked), so that
                                           a run costs its ranks' work, not an interpreter's
                                           start. A cp = 1 run is made once per arguments and
                                           shared with every cp_1_dump of the same arguments.
  cp_1_dump(cpparity_case, *arguments)     the rank dump of that run at cp 1, for judging a
                                           cp > 1 run against it too (cpparity_case.baseline)
  matrix                                   the parity matrix's inputs (docs/frameworks.md):
                                           when $CPPARITY_MATRIX_RESULTS is set,
                                           matrix.keep(cpparity_case, BACKEND, LABEL) keeps the
                                           test's results file there as BACKEND/LABEL.h5 once
                                           it is judged, and matrix.not_supported(...) records a
                                           case a backend does not claim
                                           (BACKEND/CASE-DTYPE-cpCP.not-supported.json)
"""
import json
import os
import runpy
import shutil
import sys

import pytest

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(SOURCE, "examples", "torch-cp", "run.py")
if os.path.dirname(EXAMPLE) not in sys.path:  # its modules importable, as when python runs it
    sys.path.insert(0, os.path.dirname(EXAMPLE))


class _Example:
    """run.py's main, loaded once, and the session's cp = 1 runs."""

    def __init__(self, folder):
        self.main = runpy.run_path(EXAMPLE, run_name="cpparity_example")["main"]
        self.folder = folder
        self.cp_1_runs = {}  # (export, arguments) -> the folder of its rank_0.h5

    def run(self, export, cp, out, arguments):
        argv = [export, "--cp", str(cp), "--out", out] + [str(a) for a in arguments]
        try:
            code = self.main(argv)
        except SystemExit as stop:
            code = stop.code
        if code not in (0, None):
            pytest.fail(f"run.py {' '.join(argv)}: exit {code}", pytrace=False)

    def cp_1_dump(self, export, arguments):
        key = (export, tuple(str(a) for a in arguments))
        if key not in self.cp_1_runs:
            out = os.path.join(self.folder, f"cp1-{len(self.cp_1_runs)}")
            self.run(export, 1, out, arguments)
            self.cp_1_runs[key] = out
        return os.path.join(self.cp_1_runs[key], "rank_0.h5")


@pytest.fixture(scope="session")
def _example(tmp_path_factory):
    return _Example(str(tmp_path_factory.mktemp("cp1-runs")))


@pytest.fixture
def run_example(_example):
    def run(case, *arguments):
        if case.cp == 1:
            shutil.copy(_example.cp_1_dump(case.export, arguments), case.dump_path(0))
        else:
            _example.run(case.export, case.cp, case.dumps, arguments)
    return run


@pytest.fixture
def cp_1_dump(_example):
    def dump(case, *arguments):
        return _example.cp_1_dump(case.export, arguments)
    return dump


class _Matrix:
    def __init__(self):
        self.folder = os.environ.get("CPPARITY_MATRIX_RESULTS") or None
        self.kept = []  # (case, backend, label)

    def keep(self, case, backend, label):
        self.kept.append((case, backend, label))

    def not_supported(self, backend, framework, version, case, dtype, cp, reason):
        if self.folder is None:
            return
        os.makedirs(os.path.join(self.folder, backend), exist_ok=True)
        record = {"backend": backend, "framework": framework, "framework_version": version,
                  "case": case, "dtype": dtype, "cp": cp, "reason": reason}
        path = os.path.join(self.folder, backend, f"{case}-{dtype}-cp{cp}.not-supported.json")
        with open(path, "w") as out:
            json.dump(record, out, indent=1)

    def finish(self):
        """After the test was judged: its results files into the matrix's folder."""
        for case, backend, label in self.kept:
            if self.folder is not None and case.verdict is not None:
                os.makedirs(os.path.join(self.folder, backend), exist_ok=True)
                shutil.copy(case.results, os.path.join(self.folder, backend, f"{label}.h5"))


@pytest.fixture
def matrix():
    kept = _Matrix()  # its teardown comes after the test's call, where the plugin judged
    yield kept
    kept.finish()
