"""cpparity from Python: run the `cpparity` command and read its verdict from the results file.

    import cpparity
    exported = cpparity.export("cases/ci.yaml", cases=["full-no-padding"], out="case.h5")
    ... the framework's ranks write their dumps (cpparity_dump.write_rank_dump) ...
    verdict = cpparity.judge(exported, ["rank_0.h5", "rank_1.h5"])
    verdict.raise_for_failure()      # ParityError naming tensor, rank, position, error, limit

    cpparity.run("cases/ci.yaml", cases=["sliding-*"], ranks=4).raise_for_failure()
    cpparity.cases("cases/ci.yaml")  # the suite's case names

Exit code 2 (bad input) raises InputError and 3 (a runtime failure) RuntimeFailure, each with
the command's own message; a parity failure (exit 1) is a Verdict whose `passed` is False. The
command is found through CPPARITY, the environment's bin/ or PATH (_command.find_command)."""
import os
import tempfile

from ._command import (CommandError, CommandNotFound, InputError, RuntimeFailure, find_command,
                       raise_for_exit, run_command)
from .results import Failure, Item, ParityError, Verdict, read_results

__version__ = "0.1.0"
__all__ = ["run", "judge", "export", "report", "cases", "read_results", "Verdict", "Item",
           "Failure", "ParityError", "CommandError", "InputError", "RuntimeFailure", "CommandNotFound",
           "find_command"]


def _results_path(out, name):
    """out, or a fresh path in a new temporary folder (the command never overwrites a file)."""
    if out is not None:
        return os.fspath(out)
    return os.path.join(tempfile.mkdtemp(prefix="cpparity-"), name)


def _options(**flags):
    """--flag value for every given value (True: the flag alone; lists: repeated)."""
    arguments = []
    for name, value in flags.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            arguments.append(flag)
        elif isinstance(value, (list, tuple)):
            for each in value:
                arguments += [flag, str(each)]
        else:
            arguments += [flag, str(value)]
    return arguments


def _succeeded(arguments, cwd=None, launcher=None):
    """Runs a command that must exit 0 (export, list, report); its standard output."""
    code, stdout, stderr = run_command(arguments, cwd=cwd, launcher=launcher)
    raise_for_exit(code, stderr, arguments)
    if code != 0:
        raise CommandError(code, stderr, ["cpparity"] + arguments)
    return stdout


def _finish(arguments, out, report_path, launcher, cwd):
    code, stdout, stderr = run_command(arguments, cwd=cwd, launcher=launcher)
    raise_for_exit(code, stderr, arguments)
    verdict = read_results(out, console=stdout)
    if report_path is not None:
        verdict.report_path = report(out, report_path)
    if (code == 0) != verdict.passed:
        raise CommandError(code, f"the results file {out} says "
                           f"{'passed' if verdict.passed else 'failed'} but the command exited "
                           f"{code}: {stderr}", ["cpparity"] + arguments)
    return verdict


def run(suite, *, cases=None, out=None, comm=None, ranks=None, dtype=None, layout=None,
        algorithm=None, seed=None, inject=None, store=None, kernel=None, allow_not_run=False,
        report=None, launcher=None, cwd=None, extra=()):
    """`cpparity run SUITE`: the built-in implementation (or --kernel's) against the reference.
    Returns the Verdict; report=PATH also writes the HTML report there."""
    out = _results_path(out, "run.h5")
    arguments = (["run", os.fspath(suite)]
                 + _options(case=list(cases or []), comm=comm, ranks=ranks, dtype=dtype,
                            layout=layout, algorithm=algorithm, seed=seed, inject=inject,
                            store=store, kernel=kernel, allow_not_run=allow_not_run, out=out)
                 + list(extra))
    return _finish(arguments, out, report, launcher, cwd)


def judge(export_file, dumps, *, baseline=None, out=None, store=None, threads=None,
          max_memory=None, reference_cache=None, report=None, launcher=None, cwd=None, extra=()):
    """`cpparity judge EXPORT DUMPS...`: a framework's rank dumps (or a kernel's dump) of the
    case `export` wrote, against its reference. Returns the Verdict."""
    out = _results_path(out, "judged.h5")
    arguments = (["judge", os.fspath(export_file)] + [os.fspath(d) for d in dumps]
                 + _options(baseline=baseline and os.fspath(baseline), store=store,
                            threads=threads, max_memory=max_memory,
                            reference_cache=reference_cache, out=out)
                 + list(extra))
    return _finish(arguments, out, report, launcher, cwd)


def export(suite, *, out, cases=None, seed=None, no_logits=False, random=None, launcher=None,
           cwd=None):
    """`cpparity export`: a case's inputs, weights, masks and reference for a framework's test
    (cpparity_dump reads it). Returns out."""
    arguments = (["export"] + ([os.fspath(suite)] if suite is not None else [])
                 + _options(case=list(cases or []), seed=seed, no_logits=no_logits,
                            random=random)
                 + ["-o", os.fspath(out)])
    _succeeded(arguments, cwd=cwd, launcher=launcher)
    return os.fspath(out)


def cases(suite):
    """`cpparity list SUITE --names`: the names of the suite's cases, in the suite's order."""
    stdout = _succeeded(["list", os.fspath(suite), "--names"])
    return [line.strip() for line in stdout.splitlines() if line.strip()]


def report(results_files, output, *, baseline=None):
    """`cpparity report`: the HTML page of one results file (or a trend of several). Returns
    output."""
    files = [results_files] if isinstance(results_files, (str, os.PathLike)) else results_files
    arguments = (["report"] + [os.fspath(f) for f in files] + ["-o", os.fspath(output)]
                 + _options(baseline=baseline and os.fspath(baseline)))
    _succeeded(arguments)
    return os.fspath(output)
