# judge_steps.sh — the steps the judge's test scripts share (tests/judge/check_judge.sh,
# check_judge_usability.sh), sourced after they set cpparity, python, make_dumps and work (a
# folder removed at exit) and checks=0. The export judged is $work/export.h5.

source "$(dirname "${BASH_SOURCE[0]}")/served.sh" # served

# fail WHAT: prints WHAT and the tail of every $work/*.out, and ends the script with exit 1.
fail() {
    echo "FAILED: $*" >&2
    for f in "$work"/*.out; do [ -f "$f" ] && { echo "--- $f" >&2; tail -15 "$f" >&2; }; done
    exit 1
}

# dumps OUT_DIR ARGS...: tests/judge/make_dumps.py on the export into a fresh OUT_DIR.
dumps() {
    local dir=$1
    shift
    rm -rf "$dir"
    served "$make_dumps" "$work/make.out" "$work/export.h5" "$dir" "$@" ||
        fail "make_dumps.py $*"
}

# judge EXPECTED_EXIT ARGS...: cpparity judge of the export, --out $work/judged.h5 (removed
# first), its output in $work/judge.out; fails unless it exits EXPECTED_EXIT. Counts a check.
judge() {
    local expected=$1
    shift
    rm -f "$work/judged.h5"
    "$cpparity" judge "$work/export.h5" "$@" --out "$work/judged.h5" > "$work/judge.out" 2>&1
    local code=$?
    [ $code = "$expected" ] || fail "judge $*: exit $code, expected $expected"
    checks=$((checks + 1))
}
