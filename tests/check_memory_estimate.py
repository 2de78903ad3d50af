#!/usr/bin/python3
"""Checks cpparity's memory estimate (harness/running/memory_estimate.h) against the memory runs
really take.

For a few cases of different shape (a long sequence, a large vocabulary, many layers, the same
parameter-heavy case at cp 1 and at cp 4 on local ranks) it

  1. asks cpparity for the estimate: `cpparity run ... --max-memory 1` is refused before anything
     runs, and the refusal gives the largest item's estimate ("needs about 41.2 GiB");
  2. runs the same command without the limit and measures the peak resident memory of the child
     (ru_maxrss from os.wait4, the child's own rusage: RUSAGE_CHILDREN for that one child);
  3. subtracts a tiny case's estimate and peak from both (the program, its libraries, OpenBLAS's
     buffers and thread stacks: what the estimate leaves out on purpose, the same for every case);
  4. requires   growth estimated >= growth measured - UNDER   and
                growth estimated <= OVER × growth measured.

usage: check_memory_estimate.py CPPARITY WORK_FOLDER
Prints one line per case with both numbers; exit 0 when every case holds, 1 when not.
"""

import os
import re
import subprocess
import sys

# The estimate may fall short of the measured growth by at most 5 % of it, plus 8 MiB. Why: the
# estimate counts the bytes the code asks for; the resident set also holds what comes with them
# and does not scale with the case: the allocator's rounding (a page per mapped block), the stacks
# and arenas of the threads that run (ranks, the reference's prefetch thread) and OpenBLAS's
# buffers for each thread that calls it — a few MiB at most here (every case measured below its
# estimate). An estimate lower than that would let a case through that then does not fit.
UNDER_FRACTION = 0.05
UNDER_BYTES = 8 << 20
# ... and may exceed it at most 2 times: the estimate adds each phase's peak and lets the
# implementation (float32, quick) peak while the float64 reference peaks beside it on its
# prefetch thread, though the implementation has often finished by then (an upper bound by
# design; measured 1.03 to 1.47 times the growth here). More than 2× would refuse cases that fit.
OVER_FACTOR = 2.0

# The tiny case's whole peak (the program and what it loads at start) must stay under this. Why:
# measured 19 to 22 MiB (the program, HDF5, OpenBLAS, MPI and the CUDA runtime); libraries loaded
# at start that are not needed (cuBLAS linked rather than opened on first use: +210 MiB, see
# distributed/models/cublas_library.h) raise every process's start-up peak, and a case's growth then
# hides under it, which makes the measurement below meaningless.
BASELINE_LIMIT = 64 << 20

MIB = 1 << 20
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}

SUITE = """\
# Shapes for tests/check_memory_estimate.py: each case makes a different part of the estimate
# large, at sizes that run in seconds on two cores (few heads keep the attention cheap; no padding,
# packing or windows, so no discrimination rerun).
defaults:
  model: {vocab_size: 64, hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 2,
          num_key_value_heads: 2, head_dim: 8, intermediate_size: 32}
  dtypes: [f32]
  seed: 3
cases:
  - name: tiny
    seq_len: 8
    cp: [1]
    rows: [{documents: [8]}]
  - name: long-sequence
    model: {hidden_size: 128, num_attention_heads: 1, num_key_value_heads: 1,
            intermediate_size: 128}
    seq_len: 8192
    cp: [1]
    rows: [{documents: [8192]}]
  - name: large-vocabulary
    model: {vocab_size: 200000}
    seq_len: 64
    cp: [1]
    rows: [{documents: [64]}]
  - name: many-layers
    model: {hidden_size: 128, num_hidden_layers: 32, num_attention_heads: 4,
            num_key_value_heads: 2, head_dim: 16, intermediate_size: 256}
    seq_len: 192
    cp: [1]
    rows: [{documents: [192]}]
  - name: parameters-cp1
    model: {vocab_size: 100000, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4,
            num_key_value_heads: 4, head_dim: 8, intermediate_size: 64}
    seq_len: 128
    cp: [1]
    rows: [{documents: [128]}]
  - name: parameters-cp4
    model: {vocab_size: 100000, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4,
            num_key_value_heads: 4, head_dim: 8, intermediate_size: 64}
    seq_len: 128
    cp: [4]
    rows: [{documents: [128]}]
"""

CASES = ["long-sequence", "large-vocabulary", "many-layers", "parameters-cp1", "parameters-cp4"]


def estimate(cpparity, suite, case, folder):
    """The estimate cpparity refuses the case with under --max-memory 1, in bytes."""
    out = os.path.join(folder, case + "-refused.h5")
    done = subprocess.run([cpparity, "run", suite, "--case", case, "--comm", "local",
                           "--max-memory", "1", "--out", out],
                          capture_output=True, text=True, check=False)
    found = re.search(r"needs about ([0-9.]+) (B|KiB|MiB|GiB|TiB) per process", done.stderr)
    if done.returncode != 2 or found is None:
        sys.exit(f"{case}: expected a refusal with the estimate (exit 2), got exit "
                 f"{done.returncode}: {done.stderr.strip()}")
    return float(found.group(1)) * UNITS[found.group(2)]


def measured_peak(cpparity, suite, case, folder):
    """The peak resident memory of `cpparity run` on the case, in bytes."""
    out = os.path.join(folder, case + ".h5")
    log = os.path.join(folder, case + ".log")
    if os.path.exists(out):
        os.remove(out)
    command = [cpparity, "run", suite, "--case", case, "--comm", "local", "--out", out]
    with open(log, "w", encoding="utf-8") as output:
        child = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage
        child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        with open(log, encoding="utf-8") as output:
            sys.exit(f"{case}: `{' '.join(command)}` exited {child.returncode}:\n{output.read()}")
    os.remove(out)
    os.remove(log)
    return usage.ru_maxrss * 1024  # kilobytes on Linux


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    cpparity, folder = sys.argv[1], sys.argv[2]
    os.makedirs(folder, exist_ok=True)
    suite = os.path.join(folder, "memory-shapes.yaml")
    with open(suite, "w", encoding="utf-8") as file:
        file.write(SUITE)
    base_estimate = estimate(cpparity, suite, "tiny", folder)
    base_peak = measured_peak(cpparity, suite, "tiny", folder)
    print(f"tiny: estimate {base_estimate / MIB:.1f} MiB, peak RSS {base_peak / MIB:.1f} MiB "
          f"(the baseline subtracted below)")
    failures = 0
    if base_peak > BASELINE_LIMIT:
        print(f"tiny: peak RSS {base_peak / MIB:.1f} MiB is over {BASELINE_LIMIT // MIB} MiB: "
              f"something large is loaded at start (ldd {cpparity})")
        failures += 1
    for case in CASES:
        grown_estimate = estimate(cpparity, suite, case, folder) - base_estimate
        grown_peak = measured_peak(cpparity, suite, case, folder) - base_peak
        lowest = grown_peak - (UNDER_FRACTION * grown_peak + UNDER_BYTES)
        ratio = grown_estimate / grown_peak if grown_peak > 0 else float("inf")
        verdict = "ok"
        if grown_estimate < lowest:
            verdict = "UNDER-ESTIMATED"
        elif grown_estimate > OVER_FACTOR * grown_peak:
            verdict = "OVER-ESTIMATED"
        failures += verdict != "ok"
        print(f"{case}: estimate +{grown_estimate / MIB:.1f} MiB, measured peak RSS "
              f"+{grown_peak / MIB:.1f} MiB, ratio {ratio:.2f}: {verdict}")
    if failures:
        print(f"{failures} case(s) outside [measured - {UNDER_FRACTION:.0%} - "
              f"{UNDER_BYTES // MIB} MiB, {OVER_FACTOR:g} x measured]")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
