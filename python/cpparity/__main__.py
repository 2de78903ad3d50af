"""`python -m cpparity ...` runs the cpparity command with the same arguments."""
import os
import sys

from ._command import CommandNotFound, find_command


def main():
    try:
        command = find_command()
    except CommandNotFound as missing:
        print(f"python -m cpparity: {missing}", file=sys.stderr)
        return 2
    os.execv(command, [command] + sys.argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
