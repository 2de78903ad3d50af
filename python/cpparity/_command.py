"""Finding and running the `cpparity` command (internal to the cpparity package).

The command is looked for, in order: the CPPARITY environment variable (a path), the `cpparity`
installed next to this Python (the environment's bin/, where `pip install .` puts it), then
PATH. Each call runs it once and returns its exit code with both streams."""
import os
import shutil
import subprocess
import sys
import sysconfig


class CommandNotFound(RuntimeError):
    """No `cpparity` command could be found."""


class CommandError(RuntimeError):
    """The command failed in a way that is not a parity verdict.

    exit_code is 2 for bad input (a file, line and field or a flag named in the message), 3 for a
    runtime failure, or another code; message is what the command said on standard error;
    command is the argument list."""

    def __init__(self, exit_code, message, command):
        self.exit_code = exit_code
        self.message = message.strip()
        self.command = list(command)
        kind = {2: "bad input", 3: "runtime failure"}.get(exit_code, f"exit {exit_code}")
        super().__init__(f"cpparity {command[1] if len(command) > 1 else ''} ({kind}): "
                         f"{self.message or '(nothing on standard error)'}")


class InputError(CommandError):
    """Exit code 2: bad input (a suite, an export, a dump or a flag); the message names it."""


class RuntimeFailure(CommandError):
    """Exit code 3: the command could not finish (out of memory, a rank that died, ...)."""


def find_command():
    """The path of the `cpparity` command this package runs."""
    given = os.environ.get("CPPARITY")
    if given:
        if not (os.path.isfile(given) and os.access(given, os.X_OK)):
            raise CommandNotFound(f"CPPARITY={given} is not an executable file")
        return given
    beside = os.path.join(sysconfig.get_path("scripts"), "cpparity")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    beside = os.path.join(os.path.dirname(sys.executable), "cpparity")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("cpparity")
    if found:
        return found
    raise CommandNotFound("no cpparity command: install it (`pip install .` from a clone of "
                          "cpparity, or `make build`) and put it on PATH, or set CPPARITY to "
                          "its path")


def run_command(arguments, cwd=None, launcher=None):
    """Runs `cpparity ARGUMENTS` (under `launcher`, e.g. ["mpirun", "-np", "2"], when given);
    returns (exit code, standard output, standard error)."""
    command = list(launcher or []) + [find_command()] + [str(a) for a in arguments]
    done = subprocess.run(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, check=False)
    return done.returncode, done.stdout, done.stderr


def raise_for_exit(exit_code, stderr, arguments):
    """Exit codes 2 and 3 (and anything but 0 and 1) become exceptions carrying the message."""
    if exit_code in (0, 1):
        return
    command = ["cpparity"] + [str(a) for a in arguments]
    if exit_code == 2:
        raise InputError(exit_code, stderr, command)
    if exit_code == 3:
        raise RuntimeFailure(exit_code, stderr, command)
    raise CommandError(exit_code, stderr, command)
