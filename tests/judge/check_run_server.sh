#!/usr/bin/env bash
# check_run_server.sh PYTHON — tests/judge/served.sh and run_server.py keep what running the
# script once per call gives: each call's exit code (main's return value, sys.exit with a number
# or a message, an uncaught exception), its output and that of the processes it forks in its own
# LOG, sys.argv and main's argument, the script's top level run once, and a failure (not a hang)
# when the serving python dies. Under 2 s.
set -u
python=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/cpparity-run-server.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
    echo "FAILED: $*" >&2
    for f in "$work"/*.out; do [ -f "$f" ] && { echo "--- $f" >&2; tail -5 "$f" >&2; }; done
    exit 1
}
source "$(dirname "${BASH_SOURCE[0]}")/served.sh"

cat > "$work/script.py" <<'PY'
import os
import sys

print("top level", flush=True)  # once per serving process


def main(argv):
    print("argv", " ".join(sys.argv[1:]), "main", " ".join(argv), flush=True)
    what = argv[0]
    if what == "return":
        return int(argv[1])
    if what == "exit-number":
        sys.exit(int(argv[1]))
    if what == "exit-message":
        sys.exit("a refusal's reason")
    if what == "raise":
        raise ValueError("a bug in the script")
    if what == "fork":
        child = os.fork()
        if child == 0:
            print("from the forked child", flush=True)
            print("child's stderr", file=sys.stderr, flush=True)
            os._exit(0)
        os.waitpid(child, 0)
        return 0
    if what == "die":
        os._exit(9)
    return 0
PY
cat > "$work/no_arguments.py" <<'PY'
import sys


def main():
    print("no-argument main sees", " ".join(sys.argv[1:]))
    return 4
PY

# expect CODE LOG ARGS...: served script.py's exit code is CODE
expect() {
    local expected=$1 log=$2 code=0
    shift 2
    served "$work/script.py" "$work/$log" "$@" || code=$?
    [ "$code" = "$expected" ] || fail "served script.py $*: exit $code, expected $expected"
}
expect 0 first.out plain "with space" "quote'd"
grep -qx "argv plain with space quote'd main plain with space quote'd" "$work/first.out" ||
    fail "arguments with spaces and quotes did not arrive as given"
expect 5 return.out return 5
expect 7 exit-number.out exit-number 7
expect 1 exit-message.out exit-message
grep -q "a refusal's reason" "$work/exit-message.out" || fail "sys.exit's message is not in LOG"
expect 1 raise.out raise
grep -q "ValueError: a bug in the script" "$work/raise.out" || fail "the traceback is not in LOG"
expect 0 fork.out fork
grep -q "from the forked child" "$work/fork.out" && grep -q "child's stderr" "$work/fork.out" ||
    fail "a forked child's output is not in its call's LOG"
[ "$(cat "$work"/*.out | grep -c "top level")" = 1 ] ||
    fail "the script's top level ran more than once"
grep -q "top level" "$work/first.out" || fail "the top level's output is not in the first LOG"
grep -q "child" "$work/return.out" "$work/exit-number.out" "$work/first.out" &&
    fail "a forked child's output leaked into another call's LOG"
code=0
served "$work/no_arguments.py" "$work/no_arguments.out" a b || code=$?
[ $code = 4 ] && grep -q "no-argument main sees a b" "$work/no_arguments.out" ||
    fail "a main without parameters: exit $code, or sys.argv not set"
# the serving process dies in a call: that call fails, naming the server, instead of hanging
died=
fail() { died="$*"; }
served "$work/script.py" "$work/die.out" die
grep -q "tests/judge/run_server.py died running .*script.py .*die.out die" <<< "$died" || {
    echo "FAILED: a dead server: '$died'" >&2
    exit 1
}
echo "served: exit codes, LOGs, forks, sys.argv and a dead server as a script run once per call"
