#!/usr/bin/env bash
# check_damaged_files.sh CPPARITY SOURCE_DIR — damaged HDF5 files that crash or hang HDF5 1.10
# itself, given to the plain command line (issue 36, fuzz/README.md "Damaged files"):
#   - every rank dump of fuzz/rank-dump-damaged/ (found by fuzzing the rank dump reader in the
#     earliest format; each crashed or hung `cpparity judge` before its files were read in a
#     forked child first) through `cpparity judge EXPORT DUMP`;
#   - every results file of fuzz/results-damaged/ through `cpparity report` and `cpparity diff`.
# Each must exit 2 within a bounded time with "FILE is damaged: reading HDF5_PATH ..." naming
# the file and an HDF5 path, never end by a signal (exit > 128) or hang, and leave no output
# and no temporary file behind. CPPARITY_HDF5_READ_SECONDS=2 bounds the hung reads (a read of
# these files takes milliseconds: 2 s is far above it, and keeps the test short).
# Exit 0 when every file holds, 1 otherwise (each failure listed).
set -u
cpparity=$(realpath "$1")
source_dir=$(realpath "$2")
work=$(mktemp -d /tmp/cpparity-damaged-XXXXXX)
trap 'rm -rf "$work"' EXIT
export CPPARITY_HDF5_READ_SECONDS=2
failures=0
checked=0
fail() {
    echo "FAILED: $*"
    failures=$((failures + 1))
}
# check FILE EXPECTED_NAME COMMAND...: exit 2 within 60 s naming FILE as damaged, no signal,
# nothing left in $work/out
check() {
    local file=$1
    shift
    rm -rf "$work/out" && mkdir -p "$work/out"
    local started=$SECONDS
    (cd "$work/out" && timeout -s KILL 60 "$@") > "$work/stdout" 2> "$work/stderr"
    local code=$? elapsed=$((SECONDS - started))
    checked=$((checked + 1))
    if [ $code = 137 ]; then
        fail "$(basename "$file"): still running after 60 s"
    elif [ $code -gt 128 ]; then
        fail "$(basename "$file"): ended by signal $((code - 128)): $(tail -2 "$work/stderr")"
    elif [ $code != 2 ]; then
        fail "$(basename "$file"): exit $code, expected 2: $(tail -2 "$work/stderr")"
    # A file whose HDF5 metadata asks for more memory than the machine has available fails
    # that allocation inside the reading child (its address space is limited to what is
    # available) and is then named with the object that cannot be read; with more memory
    # available the same file gets the child killed. Both name the file and the HDF5 path.
    elif ! grep -q "$file is damaged: reading /[^ ]* .*\(crashed inside the HDF5 library\|hung inside the HDF5 library\|was killed\)" "$work/stderr" &&
        ! grep -q "$file: /[^ ]*: .*cannot be read" "$work/stderr"; then
        fail "$(basename "$file"): not named as damaged with an HDF5 path: $(tail -2 "$work/stderr")"
    elif [ -n "$(ls -A "$work/out")" ]; then
        fail "$(basename "$file"): left $(ls -A "$work/out" | head -3 | tr '\n' ' ')"
    else
        echo "ok $(basename "$file") (${elapsed} s): $(grep -o 'is damaged: .*' "$work/stderr" | head -1)"
    fi
}

"$cpparity" export "$source_dir/fuzz/rank-dump-case.yaml" --case fuzz-rank-dump \
    -o "$work/export.h5" > "$work/export.txt" 2>&1 || { cat "$work/export.txt"; exit 1; }
for dump in "$source_dir"/fuzz/rank-dump-damaged/*.h5; do
    [ -f "$dump" ] || continue
    check "$dump" "$cpparity" judge "$work/export.h5" "$dump" --out results.h5
done
for results in "$source_dir"/fuzz/results-damaged/*.h5; do
    [ -f "$results" ] || continue
    check "$results" "$cpparity" report "$results" -o report.html
    check "$results" "$cpparity" diff "$results" "$results"
done
echo "damaged files: $checked commands, $failures failures"
[ $failures = 0 ] && [ $checked -gt 0 ]
