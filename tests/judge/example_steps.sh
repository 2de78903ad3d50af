# example_steps.sh — the steps check_torch_examples.sh and check_external.sh share, sourced by
# both after they set: cpparity (the binary), source_dir, python (the interpreter that runs
# examples/torch-cp/run.py) and work (a scratch folder; every *.out in it is shown on failure).
#   fail MESSAGE...                       print it and the tail of every log, exit 1
#   gloo_works [PYTHON_LINES]             whether $python, after PYTHON_LINES (imports to
#                                         probe), starts a gloo group and all-reduces in it;
#                                         its output in $work/probe.out
#   export_case NAME                      cases/ci.yaml's case NAME exported to $work/export.h5
#   served SCRIPT LOG ARGS...             (tests/judge/served.sh) python SCRIPT ARGS > LOG
#   run OUT_DIR RUN_ARGS...               run.py on that export, one dump per rank in OUT_DIR
#   judge EXPECTED_EXIT DUMP_DIR ARGS...  cpparity judge of OUT_DIR's dumps, output in
#                                         $work/judge.out; fail unless it exits EXPECTED_EXIT
#   skip REASON [LOG]                     print SKIP: REASON and the log's last lines, exit 77
#   torch2_python                         set $python to the pinned PyTorch 2 environment's
#                                         (scripts/torch2-env.sh, made on first use); skip with
#                                         its reason when it cannot be made (its exit 77)
#   pytest_file FILE PASSED               the pytest file FILE (tests/python/) on cpparity's
#                                         plugin, in $python: every test passes, PASSED of them
#                                         (none skipped), output in $work/pytest.out
#   keep_result BACKEND LABEL             when $CPPARITY_MATRIX_RESULTS is set, keep the last
#                                         judge's results file there as BACKEND/LABEL.h5: the
#                                         input of docs/frameworks.md (scripts/framework_matrix.py)
#   not_supported BACKEND FRAMEWORK VERSION CASE DTYPE CP REASON
#                                         say that BACKEND does not claim CASE (not run, not a
#                                         FAIL) and, when $CPPARITY_MATRIX_RESULTS is set, record
#                                         it there as BACKEND/CASE-DTYPE-cpCP.not-supported.json
source "$(dirname "${BASH_SOURCE[0]}")/served.sh" # served
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
    served "$source_dir/examples/torch-cp/run.py" "$work/run.out" "$work/export.h5" --out "$dir" \
        "$@" || fail "run.py $*"
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
pytest_file() {
    local file=$1 expected=$2
    (cd "$work" && CPPARITY=$cpparity PYTHONPATH=$source_dir/python DS_ACCELERATOR=cpu \
        "$python" -m pytest -p cpparity.pytest_plugin -p no:cacheprovider -q -rfEs \
        --cpparity-dir "$work/pytest" "$file") > "$work/pytest.out" 2>&1 ||
        { sed -n '/^=* FAILURES =*$/,$p' "$work/pytest.out" | head -80 >&2
          fail "pytest $(basename "$file") failed"; }
    local summary
    summary=$(tail -1 "$work/pytest.out")
    [[ $summary =~ ^$expected\ passed\ in ]] ||
        fail "pytest $(basename "$file"): '$summary', expected $expected passed and nothing else"
    echo "$(basename "$file"): $summary"
}
gloo_works() {
    "$python" - > "$work/probe.out" 2>&1 <<EOF
${1:-}
import socket
import torch
import torch.distributed as dist
with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
value = torch.ones(1)
dist.all_reduce(value)
dist.destroy_process_group()
EOF
}
skip() {
    echo "SKIP: $1"
    [ $# -gt 1 ] && tail -8 "$2"
    exit 77
}
torch2_python() {
    python=$("$source_dir/scripts/torch2-env.sh" 2> "$work/env.out")
    local code=$?
    [ $code = 77 ] &&
        skip "the PyTorch 2 environment (scripts/torch2-env.sh) cannot be made:" "$work/env.out"
    [ $code = 0 ] || fail "scripts/torch2-env.sh: exit $code"
}
keep_result() {
    [ -n "${CPPARITY_MATRIX_RESULTS:-}" ] || return 0
    mkdir -p "$CPPARITY_MATRIX_RESULTS/$1" &&
        cp "$work/judged.h5" "$CPPARITY_MATRIX_RESULTS/$1/$2.h5" ||
        fail "cannot keep $work/judged.h5 in $CPPARITY_MATRIX_RESULTS/$1"
}
not_supported() {
    local backend=$1 framework=$2 version=$3 case=$4 dtype=$5 cp=$6 reason=$7
    echo "not supported: $backend $case $dtype cp $cp: $reason"
    [ -n "${CPPARITY_MATRIX_RESULTS:-}" ] || return 0
    mkdir -p "$CPPARITY_MATRIX_RESULTS/$backend" || fail "cannot write $CPPARITY_MATRIX_RESULTS"
    "$python" - "$CPPARITY_MATRIX_RESULTS/$backend/$case-$dtype-cp$cp.not-supported.json" \
        "$backend" "$framework" "$version" "$case" "$dtype" "$cp" "$reason" <<'EOF' ||
import json, sys
keys = ("backend", "framework", "framework_version", "case", "dtype", "cp", "reason")
record = dict(zip(keys, sys.argv[2:]))
record["cp"] = int(record["cp"])
json.dump(record, open(sys.argv[1], "w"), indent=1)
EOF
        fail "cannot record $backend $case as not supported"
}
