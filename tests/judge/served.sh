# served.sh — `served SCRIPT LOG ARGS...`: what `"$python" SCRIPT ARGS... > LOG 2>&1` does, its
# exit code returned, but run by one python process kept for the whole test
# (tests/judge/run_server.py, started at the first call), so that torch and the frameworks are
# imported once, not once per run (seconds each). Sourced by example_steps.sh and
# judge_steps.sh; uses their fail and $python. Not from a subshell: $(served ...) cannot reach
# the process.
served_server=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/run_server.py
served() {
    if [ -z "${served_process_PID:-}" ]; then
        coproc served_process { exec "$python" "$served_server"; }
    fi
    local code
    { printf '%q ' "$@"; echo; } >&"${served_process[1]}" &&
        read -r code <&"${served_process[0]}" || {
        fail "the python of tests/judge/run_server.py died running $* (see $2)"
        return 1
    }
    return "$code"
}
