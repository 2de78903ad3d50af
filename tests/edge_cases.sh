#!/usr/bin/env bash
# edge_cases.sh — the edges of a run, tried on a real cpparity process: full disks, a file size
# limit, signals, concurrent runs. Each failure here was once reproduced on cpparity (issue 13):
# a segfault on a full disk, debris after a signal, partial outputs, late discovery of a clash.
#
#   tests/edge_cases.sh CPPARITY SOURCE_DIR SCENARIO
#
# Exit 0 on success, 77 when the scenario cannot be tried here (the reason is printed), else 1.
set -u
set -m # job control: background processes get SIGINT (a shell without it makes them ignore it)
cpparity=$1
source_dir=$2
scenario=$3
suite=$source_dir/cases/ci.yaml
work=$(mktemp -d /tmp/cpparity-edges-XXXXXX)
mounted=""
cleanup() {
    [ -n "$mounted" ] && umount "$mounted" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

fail() {
    echo "FAILED: $*" >&2
    for f in "$work"/*.out "$work"/*.err; do
        [ -f "$f" ] && { echo "--- $f" >&2; tail -20 "$f" >&2; }
    done
    exit 1
}
skip() {
    echo "SKIPPED: $*"
    exit 77
}
# Lists every entry of a folder, hidden ones included, one per line.
entries() { ls -A "$1"; }
# Mounts a tmpfs of the given size on a new folder, $mounted; skips when not allowed.
small_disk() {
    local folder=$work/disk-$1
    mkdir -p "$folder"
    mount -t tmpfs -o size="$1" tmpfs "$folder" 2>/dev/null ||
        skip "cannot mount a $1 tmpfs here (needs root or CAP_SYS_ADMIN)"
    mounted=$folder
}
# A case slow enough (several seconds) to be interrupted while it computes.
slow_suite() {
    cat >"$work/slow.yaml" <<'YAML'
cases:
  - name: slow-enough-to-interrupt
    model: {vocab_size: 512, hidden_size: 256, num_hidden_layers: 4, num_attention_heads: 4,
            num_key_value_heads: 2, head_dim: 64, intermediate_size: 512,
            layer_types: [full_attention, full_attention, full_attention, full_attention]}
    seq_len: 2048
    rows: [{documents: [2048]}, {documents: [2048]}]
    cp: [1, 2]
    dtypes: [f32]
YAML
    echo "$work/slow.yaml"
}
# Waits (up to 60 s) until path exists.
wait_for() {
    for _ in $(seq 1 600); do
        [ -e "$1" ] && return 0
        sleep 0.1
    done
    fail "$1 never appeared"
}
# Starts a slow run writing $work/out/results.h5 and a JUnit report; waits until it computes
# (its outputs are claimed once checked, before any case runs).
start_slow_run() {
    mkdir -p "$work/out"
    "$cpparity" run "$(slow_suite)" --comm local --ranks 2 --out "$work/out/results.h5" \
        --junit "$work/out/report.xml" >"$work/run.out" 2>"$work/run.err" &
    run_pid=$!
    wait_for "$work/out/.results.h5.cpparity-claim"
    sleep 0.5
}

case $scenario in
disk-full)
    # Every output on a 64 KiB disk: the results file cannot be written. Exit 3 naming the file
    # and the reason, no crash, nothing published, no temporary file left.
    small_disk 64k
    disk=$mounted
    "$cpparity" run "$suite" --comm local --ranks 4 --case 'sliding-*' --out "$disk/results.h5" \
        --junit "$disk/report.xml" --markdown "$disk/summary.md" >"$work/run.out" 2>"$work/run.err"
    code=$?
    [ $code = 3 ] || fail "exit $code, expected 3"
    grep -q "$disk/results.h5" "$work/run.err" || fail "stderr does not name the results file"
    grep -q "No space left on device" "$work/run.err" || fail "stderr does not give the reason"
    grep -q "# results: NOT WRITTEN" "$work/run.out" || fail "the footer claims a results file"
    [ -z "$(entries "$disk")" ] || fail "left behind: $(entries "$disk")"
    ;;
outputs-all-or-none)
    # The results file fits (its own folder), the Markdown summary does not (a 12 KiB disk):
    # nothing may be published, not even the results file written first.
    small_disk 12k
    disk=$mounted
    mkdir -p "$work/out"
    "$cpparity" run "$suite" --comm local --ranks 4 --case 'sliding-*' --out "$work/out/results.h5" \
        --junit "$disk/report.xml" --markdown "$disk/summary.md" >"$work/run.out" 2>"$work/run.err"
    code=$?
    [ $code = 3 ] || fail "exit $code, expected 3"
    grep -q "no output was published" "$work/run.err" || fail "stderr does not say so"
    [ -z "$(entries "$disk")" ] || fail "left on the small disk: $(entries "$disk")"
    [ -z "$(entries "$work/out")" ] || fail "published or left: $(entries "$work/out")"
    ;;
file-size-limit)
    # A file size limit (ulimit -f, 16 KiB) makes writes fail with EFBIG instead of killing the
    # process with SIGXFSZ: exit 3 with the reason, nothing left. Needs no privilege.
    mkdir -p "$work/out"
    (ulimit -f 16 && exec "$cpparity" run "$suite" --comm local --ranks 4 --case 'sliding-*' \
        --out "$work/out/results.h5" --junit "$work/out/report.xml") >"$work/run.out" 2>"$work/run.err"
    code=$?
    [ $code = 3 ] || fail "exit $code, expected 3"
    grep -q "File too large" "$work/run.err" || fail "stderr does not give the reason"
    [ -z "$(entries "$work/out")" ] || fail "left behind: $(entries "$work/out")"
    ;;
signal-run)
    # SIGTERM, SIGINT and SIGHUP while a run computes: exit 143, 130, 129; stderr says which
    # case was running; no output, no temporary file, no claim left.
    for pair in TERM:143 INT:130 HUP:129; do
        signal=${pair%%:*}
        expected=${pair##*:}
        start_slow_run
        kill -s "$signal" $run_pid
        wait $run_pid
        code=$?
        [ $code = "$expected" ] || fail "SIG$signal: exit $code, expected $expected"
        grep -q "interrupted by SIG$signal while running case 'slow-enough-to-interrupt'" \
            "$work/run.err" || fail "SIG$signal: stderr does not name the case"
        [ -z "$(entries "$work/out")" ] || fail "SIG$signal left: $(entries "$work/out")"
    done
    ;;
signal-export)
    # SIGINT while export computes into its temporary file: exit 130, the file is gone.
    mkdir -p "$work/out"
    "$cpparity" export "$(slow_suite)" --case slow-enough-to-interrupt -o "$work/out/case.h5" \
        >"$work/export.out" 2>"$work/export.err" &
    pid=$!
    wait_for "$work/out/.case.h5.cpparity-claim"
    sleep 0.5
    [ -n "$(ls -A "$work/out" | grep '\.case\.h5\.tmp-')" ] || fail "no temporary file while computing"
    kill -INT $pid
    wait $pid
    code=$?
    [ $code = 130 ] || fail "exit $code, expected 130"
    grep -q "interrupted by SIGINT while running the export of case" "$work/export.err" ||
        fail "stderr does not say what was running"
    [ -z "$(entries "$work/out")" ] || fail "left behind: $(entries "$work/out")"
    ;;
signal-mpi-rank)
    # One rank of an MPI job gets SIGTERM: it cleans up and exits 143, mpirun aborts the others
    # (they get SIGTERM too) and returns 143. A rank killed by SIGKILL cannot clean up: mpirun
    # returns 137. README's exit-code table documents both.
    command -v mpirun >/dev/null || skip "mpirun not found"
    root=""
    [ "$(id -u)" = 0 ] && root=--allow-run-as-root
    for pair in TERM:143 KILL:137; do
        signal=${pair%%:*}
        expected=${pair##*:}
        rm -rf "$work/out" && mkdir -p "$work/out"
        OMPI_MCA_btl_vader_single_copy_mechanism=none mpirun -np 2 --oversubscribe $root \
            "$cpparity" run "$(slow_suite)" --out "$work/out/results.h5" \
            >"$work/mpi.out" 2>"$work/mpi.err" &
        mpirun_pid=$!
        wait_for "$work/out/.results.h5.cpparity-claim"
        sleep 1
        rank=$(pgrep -P "$mpirun_pid" -f "cpparity run" | tail -1)
        [ -n "$rank" ] || rank=$(pgrep -f "cpparity run $work/slow.yaml" | grep -v "^$mpirun_pid\$" | tail -1)
        [ -n "$rank" ] || fail "no rank process found"
        kill -s "$signal" "$rank"
        wait $mpirun_pid
        code=$?
        [ $code = "$expected" ] || fail "SIG$signal to one rank: mpirun exit $code, expected $expected"
        if [ "$signal" = TERM ]; then
            grep -q "interrupted by SIGTERM" "$work/mpi.err" || fail "no rank said it was interrupted"
            [ -z "$(entries "$work/out")" ] || fail "left behind: $(entries "$work/out")"
        fi
    done
    ;;
timeout-mpi-rank-stopped)
    # One rank of an MPI job stops (SIGSTOP: a hung GPU, a stuck node) while the job runs with
    # --timeout 5: rank 0, which holds the outputs' claims, times out in a collective, says so,
    # removes its claims and temporary files and calls MPI_Abort(3); mpirun exits 3 and --out is
    # left as it was (only a SIGKILL may leave a claim behind).
    command -v mpirun >/dev/null || skip "mpirun not found"
    root=""
    [ "$(id -u)" = 0 ] && root=--allow-run-as-root
    mkdir -p "$work/out"
    OMPI_MCA_btl_vader_single_copy_mechanism=none mpirun -np 2 --oversubscribe $root \
        "$cpparity" run "$suite" --timeout 5 --out "$work/out/results.h5" \
        >"$work/mpi.out" 2>"$work/mpi.err" &
    mpirun_pid=$!
    wait_for "$work/out/.results.h5.cpparity-claim"
    stopped=""
    # the CI suite's many short items: rank 0 meets a collective with rank 1 within a second
    for pid in $(pgrep -f "cpparity run $suite --timeout 5"); do
        if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then
            stopped=$pid
        fi
    done
    [ -n "$stopped" ] || fail "no process of rank 1 found"
    kill -STOP "$stopped"
    wait $mpirun_pid
    code=$?
    kill -KILL "$stopped" 2>/dev/null
    [ $code = 3 ] || fail "a stopped rank: mpirun exit $code, expected 3"
    grep -q "timed out after 5 s" "$work/mpi.err" || fail "no rank said which collective timed out"
    [ -z "$(entries "$work/out")" ] || fail "left behind: $(entries "$work/out")"
    ;;
concurrent-out)
    # A second run with the same --out is refused at once (exit 2, naming the first), not after
    # its compute; the first run is unaffected.
    start_slow_run
    started=$(date +%s)
    "$cpparity" run "$suite" --comm local --case full-no-padding --out "$work/out/results.h5" \
        >"$work/second.out" 2>"$work/second.err"
    code=$?
    [ $code = 2 ] || fail "second run: exit $code, expected 2"
    grep -q -- "--out $work/out/results.h5: process $run_pid on .* is writing it already" \
        "$work/second.err" || fail "second run: stderr does not name the first run"
    [ $(($(date +%s) - started)) -lt 10 ] || fail "the second run was not refused at once"
    kill -TERM $run_pid
    wait $run_pid
    [ -z "$(entries "$work/out")" ] || fail "left behind: $(entries "$work/out")"
    ;;
*)
    fail "unknown scenario $scenario"
    ;;
esac
echo "PASSED: $scenario"
