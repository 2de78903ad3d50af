#!/usr/bin/env python3
"""check_python_api.py CPPARITY SOURCE_DIR — the Python API's verdicts (python/cpparity) equal
the command's: on twelve runs of CI cases, passing and failing (faults planted with --inject),
the Verdict of the command's results file (cpparity.read_results; for every third run also
`cpparity.run`'s own) passed exactly when the command exits 0, its items' outcomes are the
console's and the results file's, and its failure lines are the console's "FAIL ..." lines
(the first eight of each item, as the console shows them); exit code 2 raises InputError with
the command's message, and raise_for_failure raises ParityError naming tensor, rank and
position; the Verdict names the implementation as the console does, and cpparity.cases is the
suite's case names. Exit 0 when all holds, 1 otherwise. About 20 s."""
import os
import re
import subprocess
import sys
import tempfile

cpparity_path, source = sys.argv[1], sys.argv[2]
os.environ["CPPARITY"] = cpparity_path
sys.path.insert(0, os.path.join(source, "python"))
import cpparity  # noqa: E402

SUITE = os.path.join(source, "cases", "ci.yaml")
# (cases, fault): passing runs, and faults each failing a different tensor kind
RUNS = [
    (["full-no-padding"], None),
    (["sliding-w5-odd-crossing-shards"], None),
    (["chunked-c5-packed-left-padding"], None),
    (["refuse-heads-not-divisible-by-cp"], None),
    (["full-no-padding"], "grad-scaled-by-cp"),
    (["sliding-w5-odd-crossing-shards"], "window-off-by-one"),
    (["packed-documents-spanning-ranks-with-length-1"], "docs-local"),
    (["full-left-and-right-padding-in-one-batch"], "pad-leak"),
    (["chunked-c3-left-padding"], "chunk-no-left-pad"),
    (["full-no-padding"], "loss-mean-of-means"),
    (["mha-batch-3-heads-more-than-cp"], "a2a-head-order"),
    (["full-no-padding", "tied-embeddings"], "label-shift-in-shard"),
]
work = tempfile.mkdtemp(prefix="cpparity-python-api-")
problems = []


def console_failures(text):
    return sorted(line.strip() for line in text.splitlines() if line.startswith("    FAIL "))


def api_failures(verdict):
    return sorted(failure.line for item in verdict.items for failure in item.failures[:8])


failing = passing = 0
for number, (cases, fault) in enumerate(RUNS):
    out = os.path.join(work, f"command-{number}.h5")
    arguments = [cpparity_path, "run", SUITE, "--comm", "local", "--ranks", "4", "--out", out]
    arguments += [a for case in cases for a in ("--case", case)]
    arguments += ["--inject", fault] if fault else []
    done = subprocess.run(arguments, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the API's own run for every third (the others: its reading of the command's file)
    verdict = (cpparity.run(SUITE, cases=cases, comm="local", ranks=4, inject=fault,
                            out=os.path.join(work, f"api-{number}.h5"))
               if number % 3 == 0 else cpparity.read_results(out))
    name = f"{'+'.join(cases)} {fault or 'no fault'}"
    if done.returncode not in (0, 1):
        problems.append(f"{name}: the command exited {done.returncode}: {done.stderr}")
        continue
    if verdict.passed != (done.returncode == 0):
        problems.append(f"{name}: the API says passed={verdict.passed}, the command exited "
                        f"{done.returncode}")
    command_verdict = cpparity.read_results(out)
    outcomes = sorted((i.case, i.cp, i.dtype, i.layout, i.algorithm, i.status)
                      for i in command_verdict.items)
    if outcomes != sorted((i.case, i.cp, i.dtype, i.layout, i.algorithm, i.status)
                          for i in verdict.items):
        problems.append(f"{name}: the items' outcomes differ between the two runs")
    table = re.findall(r" (PASS|FAIL|REFUSED|NOT RUN|ERROR)$", done.stdout, re.M)
    if sorted(table) != sorted(i.status for i in command_verdict.items):
        problems.append(f"{name}: the console's outcomes {sorted(table)} are not the results "
                        f"file's {sorted(i.status for i in command_verdict.items)}")
    if console_failures(done.stdout) != api_failures(command_verdict):
        problems.append(f"{name}: failure lines differ:\n  console "
                        f"{console_failures(done.stdout)[:3]}\n  API {api_failures(command_verdict)[:3]}")
    if fault:
        failing += not verdict.passed
        if verdict.passed:
            problems.append(f"{name}: the planted fault passed")
            continue
        try:
            verdict.raise_for_failure()
            problems.append(f"{name}: raise_for_failure did not raise")
        except cpparity.ParityError as error:
            message = str(error)
            first = verdict.failures[0] if verdict.failures else None
            if first is None or f"rank {first.rank}" not in message or first.tensor not in message:
                problems.append(f"{name}: the ParityError does not name the tensor and rank:\n"
                                f"{message[:400]}")
            if first is not None and first.position is not None and \
                    f"position {first.position}" not in message:
                problems.append(f"{name}: the ParityError does not name the position")
    else:
        passing += verdict.passed
        verdict.raise_for_failure()

# the implementation judged, as the console's header names it; a suite's case names
implementation = re.search(r"^# ranks .*, implementation (.*), kernel ", subprocess.run(
    [cpparity_path, "run", SUITE, "--case", "full-no-padding", "--comm", "local", "--ranks", "2",
     "--out", os.path.join(work, "named.h5")], stdout=subprocess.PIPE, text=True).stdout, re.M)
if implementation is None or \
        cpparity.read_results(os.path.join(work, "named.h5")).implementation != implementation[1]:
    problems.append(f"the Verdict's implementation is not the console's {implementation}")
names = subprocess.run([cpparity_path, "list", SUITE, "--names"], stdout=subprocess.PIPE,
                       text=True).stdout.split()
if cpparity.cases(SUITE) != names or len(names) < 10:
    problems.append(f"cpparity.cases is not `cpparity list --names`: {cpparity.cases(SUITE)[:3]}")

try:
    cpparity.run(SUITE, cases=["no-such-case"], comm="local", ranks=1,
                 out=os.path.join(work, "bad.h5"))
    problems.append("a --case matching nothing did not raise")
except cpparity.InputError as error:
    if error.exit_code != 2 or "--case no-such-case matches no case" not in error.message:
        problems.append(f"InputError without the command's message: {error}")

if problems:
    print("FAILED:\n" + "\n".join(problems))
    sys.exit(1)
print(f"OK: {len(RUNS)} results files ({passing} passing, {failing} failing): the API's verdicts "
      f"and failure lines are the command's; exit 2 raises InputError")
