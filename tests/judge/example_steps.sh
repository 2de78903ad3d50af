# example_steps.sh — the steps check_torch_examples.sh and check_external.sh share, sourced by
# both after they set: cpparity (the binary), source_dir, python (the interpreter that runs
# examples/torch-cp/run.py) and work (a scratch folder; every *.out in it is shown on failure).
#   fail MESSAGE...                       print it and the tail of every log, exit 1
#   export_case NAME                      cases/ci.yaml's case NAME exported to $work/export.h5
#   run OUT_DIR RUN_ARGS...               run.py on that export, one dump per rank in OUT_DIR
#   judge EXPECTED_EXIT DUMP_DIR ARGS...  cpparity judge of OUT_DIR's dumps, output in
#                                         $work/judge.out; fail unless it exits EXPECTED_EXIT
fail() {
    echo "FAILED: $*" >&2
    for f in "$work"/*.out; do [ -f "$f" ] && { echo "--- $f" >&2; tail -15 "$f" >&2; }; done
    exit 1
}
export_case() {
    rm -f "$work/export.h5"
    "$cpparity" export "$source_dir/cases/ci.yaml" --case "$1" -o "$work/export.h5" \
        > "$work/export.out" 2>&1 || fail "export of $1"
}
run() {
    local dir=$1
    shift
    rm -rf "$dir"
    "$python" "$source_dir/examples/torch-cp/run.py" "$work/export.h5" --out "$dir" "$@" \
        > "$work/run.out" 2>&1 || fail "run.py $*"
}
judge() {
    local expected=$1 dir=$2
    shift 2
    rm -f "$work/judged.h5"
    "$cpparity" judge "$work/export.h5" "$dir"/rank_*.h5 "$@" --out "$work/judged.h5" \
        > "$work/judge.out" 2>&1
    local code=$?
    [ $code = "$expected" ] || fail "judge of $dir $*: exit $code, expected $expected"
}
