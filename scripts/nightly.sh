#!/usr/bin/env bash
# nightly.sh RESULTS_DIR — the nightly parity job. Runs the nightly suite on this node's GPUs
# (cases/nightly.yaml with --device cuda, when nvidia-smi lists a GPU and `cpparity --version`
# lists an implementation for --device cuda) or its CPU subset on CPU ranks otherwise
# (cases/nightly-cpu.yaml), and writes into RESULTS_DIR, named by the UTC start time STAMP:
#   STAMP.h5          the results file (docs/results-file.md)
#   STAMP.xml         JUnit XML
#   STAMP.md          the Markdown summary
#   STAMP.html        the HTML report, with the trend over the folder's earlier runs (the last
#                     CPPARITY_NIGHTLY_TREND of them) and the changes since the previous run
#   STAMP.diff.md     `cpparity diff` against the previous run (Markdown; .diff.txt the console)
#   latest.*          links to the newest of each
# Exit 0 when every item passed and nothing regressed since the previous run; 1 on a parity
# failure or a regression (a new failure, an error grown more than 2 times); otherwise the
# run's code (2 bad input, 3 environment: NOT RUN items, a missing GPU library...), or 3 when
# an output could not be written.
#
# Environment (all optional):
#   CPPARITY                  the cpparity to run (default: build/cpparity of this checkout,
#                             else cpparity on PATH)
#   CPPARITY_NIGHTLY_SUITE    the suite to run instead of the device's nightly suite (the
#                             ctest of this script points it at a one-case suite)
#   CPPARITY_NIGHTLY_ARGS     more flags for `cpparity run` (e.g. "--case 'packed-*'")
#   CPPARITY_NIGHTLY_DEVICE   cpu or cuda: skip the detection
#   CPPARITY_NIGHTLY_TREND    earlier runs in the report's trend (default 30)
#   CPPARITY_NIGHTLY_JUDGE    instead of `cpparity run`: judge a framework's own run with
#                             `cpparity judge`, given its words "EXPORT.h5 DUMP.h5 ... [--baseline
#                             CP1_DUMP.h5]" (shell words, globs expanded; docs/dump-format.md).
#                             A framework's nightly job runs its own code, writes one dump per
#                             rank, then this script: same outputs, trend, diff and exit codes
set -uo pipefail
results=${1:?usage: scripts/nightly.sh RESULTS_DIR}
source_dir=$(cd "$(dirname "$0")/.." && pwd)
cpparity=${CPPARITY:-}
if [ -z "$cpparity" ]; then
  if [ -x "$source_dir/build/cpparity" ]; then
    cpparity=$source_dir/build/cpparity
  else
    cpparity=$(command -v cpparity || true)
  fi
fi
if [ -z "$cpparity" ] || [ ! -x "$cpparity" ]; then
  echo "nightly: no cpparity (build it with 'make build', or set CPPARITY)" >&2
  exit 3
fi
mkdir -p "$results" || exit 3
trend_runs=${CPPARITY_NIGHTLY_TREND:-30}

# --- where to run: the GPUs when there are some and this cpparity can use them -----------------
device=${CPPARITY_NIGHTLY_DEVICE:-}
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if [ -z "$device" ]; then
  device=cpu
  if [ "$gpus" -gt 0 ] && "$cpparity" --version | grep -q -- '--device cuda'; then
    device=cuda
  fi
fi
run=("$cpparity" run)
if [ "$device" = cuda ]; then
  suite=${CPPARITY_NIGHTLY_SUITE:-$source_dir/cases/nightly.yaml}
  # Several GPUs: one rank per GPU through MPI and NCCL; one GPU: local ranks share it.
  if [ "$gpus" -gt 1 ] && command -v mpirun >/dev/null 2>&1 &&
     "$cpparity" --version | grep -q '^communicators:.*nccl'; then
    root_flag=$([ "$(id -u)" = 0 ] && echo --allow-run-as-root)
    run=(mpirun -np "$gpus" $root_flag "$cpparity" run)
    placement=(--device cuda --comm nccl)
  else
    placement=(--device cuda --comm local)
  fi
else
  suite=${CPPARITY_NIGHTLY_SUITE:-$source_dir/cases/nightly-cpu.yaml}
  placement=(--device cpu --comm local)
fi
# The float64 references of unchanged cases are computed once and kept next to the results
# (cpparity's --reference-cache: an entry is reused only when case, seed and reference match).
extra=(--reference-cache "$results/reference-cache")
if [ -n "${CPPARITY_NIGHTLY_ARGS:-}" ]; then
  eval "extra+=(${CPPARITY_NIGHTLY_ARGS})"
fi

# --- the run ------------------------------------------------------------------------------------
stamp=$(date -u +%Y%m%dT%H%M%SZ)
while [ -e "$results/$stamp.h5" ] || [ -e "$results/$stamp.html" ]; do
  sleep 1 # two runs in one second: the next second names the new one
  stamp=$(date -u +%Y%m%dT%H%M%SZ)
done
out=$results/$stamp
# The earlier runs, oldest first (the names sort by time).
earlier=()
while IFS= read -r file; do
  earlier+=("$file")
done < <(find "$results" -maxdepth 1 -name '[0-9]*T[0-9]*Z.h5' -type f | sort)

if [ -n "${CPPARITY_NIGHTLY_JUDGE:-}" ]; then
  eval "judged=(${CPPARITY_NIGHTLY_JUDGE})"
  echo "nightly: judging ${judged[0]} and ${#judged[@]} more files, ${#earlier[@]} earlier runs in $results"
  "$cpparity" judge "${judged[@]}" --reference-cache "$results/reference-cache" \
    --out "$out.h5" --junit "$out.xml" --markdown "$out.md"
else
  echo "nightly: $device, ${#earlier[@]} earlier runs in $results; suite $suite"
  "${run[@]}" "$suite" "${placement[@]}" "${extra[@]}" --out "$out.h5" --junit "$out.xml" \
    --markdown "$out.md"
fi
run_code=$?
if [ ! -f "$out.h5" ]; then
  echo "nightly: the run wrote no results (exit $run_code)" >&2
  exit $(( run_code == 0 ? 3 : run_code ))
fi

# --- what changed since the previous run, and the report ---------------------------------------
diff_code=0
if [ ${#earlier[@]} -gt 0 ]; then
  previous=${earlier[${#earlier[@]}-1]}
  "$cpparity" diff "$previous" "$out.h5" --markdown "$out.diff.md" >"$out.diff.txt"
  diff_code=$?
  cat "$out.diff.txt"
  if [ $diff_code = 2 ]; then
    echo "nightly: $previous and this run cannot be compared (see above); no regression check" >&2
  fi
fi
first=$(( ${#earlier[@]} > trend_runs ? ${#earlier[@]} - trend_runs : 0 ))
trend=("${earlier[@]:$first}")
report_code=0
if ! "$cpparity" report "${trend[@]}" "$out.h5" -o "$out.html"; then
  # An earlier file that cannot be read must not cost tonight's report: without the trend.
  echo "nightly: the report with the trend failed; writing it for this run alone" >&2
  "$cpparity" report "$out.h5" -o "$out.html" || report_code=3
fi
for file in "$out.h5" "$out.xml" "$out.md" "$out.html" "$out.diff.md"; do
  if [ -f "$file" ]; then
    name=$(basename "$file")
    link=$results/latest.${name#"$stamp".}
    ln -sfn "$name" "$link.tmp" && mv -Tf "$link.tmp" "$link"
  fi
done

code=$run_code
if [ $code = 0 ] && [ $diff_code = 1 ]; then
  code=1
fi
if [ $code = 0 ] && [ $report_code != 0 ]; then
  code=$report_code
fi
echo "nightly: run exit $run_code, diff exit $diff_code, report $out.html; exit $code"
exit $code
