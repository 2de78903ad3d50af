"""One python process that runs an example script many times, so that a test imports torch and
the frameworks once instead of once per run (seconds each: about 5 s for transformers, 7 s with
DeepSpeed and accelerate, on this project's 2-core machines).

    python run_server.py < REQUESTS > REPLIES

Each request is one line of shell words (bash's printf %q): SCRIPT LOG ARGS... It runs SCRIPT's
main() as `python SCRIPT ARGS... > LOG 2>&1` would: file descriptors 1 and 2 go to LOG for the
run (so the output of the ranks it forks goes there too), sys.argv is [SCRIPT, ARGS...], and
main is given ARGS when it takes an argument. The reply is one line: the exit code python would
have had (main's return value, SystemExit's code, 1 with the traceback in LOG for any other
exception). SCRIPT's top level runs once, at its first request, with its folder first on
sys.path as when python starts it; scripts of different folders whose sibling modules share a
name must not be served by one process. tests/judge/served.sh (`served`) starts one per test.
"""

import inspect
import os
import runpy
import shlex
import sys
import traceback

loaded = {}  # script path -> its main


def script_main(script):
    if script not in loaded:
        folder = os.path.dirname(os.path.abspath(script))
        if folder not in sys.path:
            sys.path.insert(0, folder)
        loaded[script] = runpy.run_path(script, run_name="served_script")["main"]
    return loaded[script]


def exit_code(code):
    """What python's exit status is for SystemExit(code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run(script, args):
    try:
        main = script_main(script)
        sys.argv = [script] + args
        takes_arguments = len(inspect.signature(main).parameters) > 0
        return exit_code(main(args) if takes_arguments else main())
    except SystemExit as stop:
        return exit_code(stop.code)
    except BaseException:  # noqa: B902  reported as python reports it, the server goes on
        traceback.print_exc()
        return 1


def serve():
    replies = os.fdopen(os.dup(1), "w")  # the request pipe's other end; also what fd 1 is again
    saved_out, saved_err = replies.fileno(), os.dup(2)
    for line in sys.stdin:
        words = shlex.split(line)
        if not words:
            continue
        script, log, args = words[0], words[1], words[2:]
        with open(log, "w") as out:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            try:
                code = run(script, args)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved_out, 1)
                os.dup2(saved_err, 2)
        print(code, file=replies, flush=True)


if __name__ == "__main__":
    serve()
