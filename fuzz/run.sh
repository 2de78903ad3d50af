#!/usr/bin/env bash
# fuzz/run.sh SECONDS [JOBS] — fuzzes the YAML case loader for SECONDS (fuzz/README.md).
#
# Configures and builds a clang build in build-fuzz/ (RelWithDebInfo, only the fuzzer) if needed,
# then runs cpparity-fuzz-case-file with the dictionary. New inputs go to build-fuzz/corpus/
# (kept between runs, never the repository); the seeds of fuzz/corpus/ are read, not written.
# JOBS > 1 runs that many fuzzing processes (libFuzzer's -fork). Prints the executions, exec/s
# and coverage; exits 1 when a crash, leak, timeout or out-of-memory input was found, listing
# the files to move to fuzz/regressions/.
# Environment: FUZZ_BUILD_DIR (default build-fuzz), FUZZ_ARGS (more libFuzzer flags),
# BUILD_JOBS (parallel compile jobs, default 2).
set -euo pipefail

usage() { echo "usage: fuzz/run.sh SECONDS [JOBS]" >&2; exit 2; }
if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
seconds=$1
jobs=${2:-1}
[[ $seconds =~ ^[1-9][0-9]*$ && $jobs =~ ^[1-9][0-9]*$ ]] || usage

root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
fuzzer=$build/cpparity-fuzz-case-file

if [ ! -f "$build/CMakeCache.txt" ]; then
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCPPARITY_SANITIZED_TESTS=OFF -DCPPARITY_UNIT_TESTS=OFF -DCMAKE_CUDA_COMPILER=NOTFOUND \
    >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 1; }
fi
if ! grep -q '^CPPARITY_HAVE_LIBFUZZER:INTERNAL=1' "$build/CMakeCache.txt"; then
  echo "fuzz/run.sh: $build has no libFuzzer target (needs clang with libFuzzer's runtime," \
       "Debian: libclang-rt-dev); see the cmake output there" >&2
  exit 1
fi
cmake --build "$build" --target cpparity-fuzz-case-file -j "${BUILD_JOBS:-2}" \
  >"$build/build.log" 2>&1 || { cat "$build/build.log" >&2; exit 1; }

corpus=$build/corpus
artifacts=$build/artifacts
mkdir -p "$corpus" "$artifacts"
started=$build/.run-started # artifacts newer than this are this run's
touch "$started"

log=$build/last-run.log
flags=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
       -dict="$root/fuzz/case_file.dict" -artifact_prefix="$artifacts/")
if [ "$jobs" -gt 1 ]; then
  flags+=(-fork="$jobs")
fi
echo "fuzz/run.sh: $seconds s, $jobs job(s), corpus $corpus, log $log"
status=0
# shellcheck disable=SC2086
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} "$fuzzer" "${flags[@]}" ${FUZZ_ARGS:-} \
  "$corpus" "$root/fuzz/corpus" >"$log" 2>&1 || status=$?

# The last status line (#N ... cov: ... ft: ... exec/s: ...) and the final statistics (with
# JOBS > 1 only the status line: libFuzzer's -fork prints no final statistics, and its cov: is
# the number of features).
echo "--- last status line"
grep -E '^#[0-9]+' "$log" | tail -n 1 || true
echo "--- final statistics"
grep -E '^stat::' "$log" || echo "(none printed with -fork; see $log)"
echo "--- corpus: $(find "$corpus" -type f | wc -l) inputs in $corpus"

found=$(find "$artifacts" -type f -newer "$started")
if [ -n "$found" ] || [ "$status" -ne 0 ]; then
  echo "--- FOUND (libFuzzer exit status $status; details in $log):"
  if [ -n "$found" ]; then
    while IFS= read -r file; do echo "  $file"; done <<<"$found"
  fi
  echo "Move each reproducer to fuzz/regressions/ under a name that says what it is" \
       "(fuzz/regressions/README.md); ctest then replays it (fuzz/case-file-regressions)."
  echo "Reproduce one: $fuzzer FILE"
  exit 1
fi
echo "--- nothing found"
