"""The cpparity pytest plugin (entry point pytest11 "cpparity"): a parity test in a framework's
own pytest suite.

    import subprocess, sys, pytest

    @pytest.mark.cpparity(suite="cases/ci.yaml", cases=["full-no-padding"], cp=[2, 4])
    def test_my_context_parallel_attention(cpparity_case):
        # cpparity_case.export: the case's inputs, weights, masks and reference (cpparity_dump
        # reads it); write one rank dump per rank into cpparity_case.dumps
        subprocess.run([sys.executable, "my_cp_run.py", cpparity_case.export,
                        "--cp", str(cpparity_case.cp), "--out", cpparity_case.dumps], check=True)

The marker parametrises the test over its cases and cp sizes (ids "CASE-cpN"). Each case is
exported once per session. When the test function returns, the plugin judges the dumps it wrote
(`cpparity judge EXPORT DUMPS/rank_*.h5`, with --baseline cpparity_case.baseline when the test
set it to a cp = 1 dump, or DUMPS/baseline.h5 when the test wrote one) and fails the test with
the verdict: each failing tensor, its rank, batch row, position or head, its error and limit and
where that limit came from. A test may judge earlier itself (cpparity_case.judge(), to look at
the Verdict); the plugin then uses that verdict.

A test that plants a bug on purpose says what the judge must find:
    cpparity_case.expect_failure(r"FAIL logits rank 1", ...)
and then passes only when the verdict fails and its message (the ParityError's) matches every
pattern (re.search); it fails when the planted bug passes or is reported otherwise.

The session fixture cpparity_export(suite, case) is the path of a case's export (made once per
session, as the marker's are), for tests that look at cases without judging a run.

Options:
  --cpparity-dir DIR      where exports, dumps and results files go (default: pytest's tmp_path;
                          results files are named after the test ids)
  --cpparity-keep         keep the exports and dumps there (results files are always kept)
  --cpparity-report DIR   the session's HTML report: DIR/index.html (every judged test, its
                          verdict, worst tensor and error / limit) linking one page per test
The `cpparity` command is found as cpparity.find_command says (CPPARITY, the environment's
bin/, PATH)."""
import functools
import os
import re
import shutil

import pytest

import cpparity

MARKER = "cpparity"
FIXTURE = "cpparity_case"


def pytest_addoption(parser):
    group = parser.getgroup("cpparity", "context-parallel parity (cpparity)")
    group.addoption("--cpparity-dir", default=None,
                    help="folder of the exports, dumps and results files (default: tmp)")
    group.addoption("--cpparity-keep", action="store_true",
                    help="keep the exports and dumps (results files are always kept)")
    group.addoption("--cpparity-report", default=None,
                    help="write the session's HTML report into this folder (index.html)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "cpparity(suite, cases, cp=[2], dtype=None): parametrise the test over a "
                   "cpparity suite's cases and cp sizes; it gets the fixture cpparity_case and is "
                   "judged when it returns")
    config._cpparity = _Session(config)


class _Session:
    """What the plugin keeps for the session: its folder, the exports, the results files."""

    def __init__(self, config):
        self.config = config
        self.folder = None
        self.exports = {}
        self.results = []  # (test id, results file, verdict)

    def root(self, tmp_path_factory):
        if self.folder is None:
            given = self.config.getoption("--cpparity-dir")
            self.folder = (os.path.abspath(given) if given
                           else str(tmp_path_factory.mktemp("cpparity")))
            os.makedirs(self.folder, exist_ok=True)
        return self.folder

    def export(self, suite, case, tmp_path_factory):
        key = (os.path.abspath(suite), case)
        if key not in self.exports:
            folder = os.path.join(self.root(tmp_path_factory), "exports")
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, f"{_safe(os.path.basename(suite))}-{_safe(case)}.h5")
            if os.path.exists(path):
                os.remove(path)  # the command never overwrites: a kept one from an earlier run
            self.exports[key] = cpparity.export(suite, cases=[case], out=path)
        return self.exports[key]


def _safe(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "test"


class ParityCase:
    """What a cpparity test gets: the case's export, its cp size, where to write the dumps."""

    def __init__(self, suite, case, cp, dtype, export, dumps, results):
        self.suite = suite      # the suite file
        self.case = case        # the case's name
        self.cp = cp            # the cp size (number of ranks) to run
        self.dtype = dtype      # "f32", "bf16" or None (the test's choice)
        self.export = export    # the `cpparity export` file of the case
        self.dumps = dumps      # folder for rank_<r>.h5 (and baseline.h5, a cp = 1 dump)
        self.results = results  # the results file the judge writes
        self.baseline = None    # a cp = 1 rank dump to judge against too (--baseline)
        self.verdict = None     # set once judged
        self.expected = None    # patterns a planted bug's verdict must match (expect_failure)

    def dump_path(self, rank):
        return os.path.join(self.dumps, f"rank_{rank}.h5")

    @property
    def baseline_path(self):
        return os.path.join(self.dumps, "baseline.h5")

    def expect_failure(self, *patterns):
        """The test plants a bug: the verdict must fail, its message matching every pattern."""
        self.expected = [re.compile(pattern) for pattern in patterns]

    def read_export(self):
        """The export read by cpparity_dump (inputs, float64 weights, masks, reference)."""
        import cpparity_dump
        return cpparity_dump.read_export(self.export)

    def judge(self):
        """Judges the dumps written so far; the Verdict (kept in self.verdict)."""
        dumps = [self.dump_path(rank) for rank in range(self.cp)]
        missing = [path for path in dumps if not os.path.exists(path)]
        if missing:
            raise AssertionError(f"cpparity: the test wrote no dump {missing[0]} (cp {self.cp}: "
                                 f"rank_0.h5 .. rank_{self.cp - 1}.h5 in {self.dumps})")
        if os.path.exists(self.results):
            os.remove(self.results)
        baseline = self.baseline
        if baseline is None and os.path.exists(self.baseline_path):
            baseline = self.baseline_path
        self.verdict = cpparity.judge(self.export, dumps, baseline=baseline, out=self.results)
        return self.verdict

    def __repr__(self):
        return f"ParityCase({self.case!r}, cp={self.cp})"


def pytest_generate_tests(metafunc):
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None:
        return
    if FIXTURE not in metafunc.fixturenames:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: @pytest.mark.cpparity needs the "
                                f"test to take the fixture {FIXTURE}")
    options = dict(marker.kwargs)
    suite = options.pop("suite", marker.args[0] if marker.args else None)
    cases = options.pop("cases", None)
    sizes = options.pop("cp", [2])
    dtype = options.pop("dtype", None)
    if suite is None or not cases:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: @pytest.mark.cpparity needs a "
                                f"suite and cases")
    if options:
        raise pytest.UsageError(f"@pytest.mark.cpparity: unknown {', '.join(options)}")
    sizes = [sizes] if isinstance(sizes, int) else list(sizes)
    cases = [cases] if isinstance(cases, str) else list(cases)
    parameters = [(suite, case, cp, dtype) for case in cases for cp in sizes]
    metafunc.parametrize(FIXTURE, parameters, indirect=True,
                         ids=[f"{case}-cp{cp}" for _, case, cp, _ in parameters])


@pytest.fixture(scope="session")
def cpparity_export(request, tmp_path_factory):
    """export(suite, case): the path of the case's `cpparity export` file, made once a session."""
    session = request.config._cpparity
    return functools.partial(_export_of, session, tmp_path_factory)


def _export_of(session, tmp_path_factory, suite, case):
    return session.export(suite, case, tmp_path_factory)


@pytest.fixture
def cpparity_case(request, tmp_path_factory):
    suite, case, cp, dtype = request.param
    session = request.config._cpparity
    export = session.export(suite, case, tmp_path_factory)
    name = _safe(request.node.nodeid.split("::", 1)[-1])
    root = session.root(tmp_path_factory)
    dumps = os.path.join(root, "dumps", name)
    shutil.rmtree(dumps, ignore_errors=True)
    os.makedirs(dumps)
    os.makedirs(os.path.join(root, "results"), exist_ok=True)
    parity = ParityCase(suite, case, cp, dtype, export, dumps,
                        os.path.join(root, "results", f"{name}.h5"))
    yield parity
    if parity.verdict is not None:
        session.results.append((request.node.nodeid, parity.results, parity.verdict))
    if not request.config.getoption("--cpparity-keep"):
        shutil.rmtree(dumps, ignore_errors=True)


def pytest_collection_modifyitems(items):
    """Each marked test's function judges its dumps when it returns, so that a parity failure
    fails the test itself (not its teardown) with the verdict as its message."""
    for item in items:
        if item.get_closest_marker(MARKER) is None or not hasattr(item, "obj"):
            continue
        original = item.obj

        @functools.wraps(original)
        def judged(*args, __original=original, __item=item, **kwargs):
            __tracebackhide__ = True  # pytest shows the verdict, not this wrapper
            result = __original(*args, **kwargs)
            parity = __item.funcargs[FIXTURE]
            verdict = parity.verdict or parity.judge()
            if parity.expected is None:
                verdict.raise_for_failure()
            else:
                _check_expected_failure(parity, verdict)
            return result

        item.obj = judged


def _check_expected_failure(parity, verdict):
    """A planted bug's test: the verdict fails, and its message says what was expected."""
    __tracebackhide__ = True
    patterns = ", ".join(repr(pattern.pattern) for pattern in parity.expected)
    if verdict.passed:
        raise AssertionError(f"cpparity: the planted bug was not found: {parity.case} cp "
                             f"{parity.cp} passed ({verdict.path}), expected a failure matching "
                             f"{patterns}")
    message = verdict.describe()
    missing = [pattern.pattern for pattern in parity.expected if not pattern.search(message)]
    if missing:
        raise AssertionError(f"cpparity: the planted bug failed, but not as expected: no match "
                             f"for {', '.join(map(repr, missing))} in\n{message}")


def pytest_sessionfinish(session):
    plugin = getattr(session.config, "_cpparity", None)
    if plugin is None or not plugin.results:
        return
    output = session.config.getoption("--cpparity-report")
    if output:
        write_report(plugin.results, output)
    if not session.config.getoption("--cpparity-keep"):
        shutil.rmtree(os.path.join(plugin.folder, "exports"), ignore_errors=True)


def write_report(results, folder):
    """folder/index.html: a row per judged test, linking its page (`cpparity report`)."""
    import html
    os.makedirs(folder, exist_ok=True)
    rows = []
    for test, path, verdict in results:
        page = f"{_safe(test.split('::', 1)[-1])}.html"
        if os.path.exists(os.path.join(folder, page)):
            os.remove(os.path.join(folder, page))
        cpparity.report(path, os.path.join(folder, page))
        worst = max(verdict.items, key=lambda item: (item.error / item.limit
                                                     if item.limit == item.limit and item.limit
                                                     else -1.0))
        ratio = worst.error / worst.limit if worst.limit == worst.limit and worst.limit else None
        rows.append(f"<tr class=\"{'pass' if verdict.passed else 'fail'}\"><td><a href=\""
                    f"{html.escape(page)}\">{html.escape(test)}</a></td><td>"
                    f"{'PASS' if verdict.passed else 'FAIL'}</td><td>"
                    f"{html.escape(worst.worst_tensor)}</td><td>"
                    f"{'' if ratio is None else f'{ratio:.3g}'}</td></tr>")
    failed = sum(not verdict.passed for _, _, verdict in results)
    with open(os.path.join(folder, "index.html"), "w", encoding="utf-8") as index:
        index.write("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>cpparity: "
                    f"{len(results)} parity tests, {failed} failed</title><style>"
                    "body{font-family:sans-serif}td,th{padding:2px 8px;text-align:left}"
                    ".fail td{background:#fdd}</style></head><body>"
                    f"<h1>cpparity: {len(results)} parity tests, {failed} failed</h1><table>"
                    "<tr><th>test</th><th>verdict</th><th>worst tensor</th>"
                    "<th>error / limit</th></tr>" + "".join(rows) + "</table></body></html>\n")


def pytest_terminal_summary(terminalreporter, config):
    plugin = getattr(config, "_cpparity", None)
    if plugin is None or not plugin.results:
        return
    terminalreporter.write_line(f"cpparity: {len(plugin.results)} results files in "
                                f"{os.path.join(plugin.folder, 'results')}")
    output = config.getoption("--cpparity-report")
    if output:
        terminalreporter.write_line(f"cpparity: report {os.path.join(output, 'index.html')}")
