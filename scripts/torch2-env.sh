#!/usr/bin/env bash
# scripts/torch2-env.sh [--where | --remove] — the one PyTorch 2 environment of the judged
# frameworks: torch, DeepSpeed, transformers and accelerate at the pins of
# scripts/torch2-constraints.txt (with numpy and h5py for python/cpparity_dump.py, pytest for the
# parity tests on cpparity's plugin), in a venv made
# on first use and then reused by every build and clone on this machine.
#
#   scripts/torch2-env.sh            make the environment if missing; print its python's path
#                                    (the last line of stdout); progress goes to stderr
#   scripts/torch2-env.sh --where    print the folder it is (or would be) in; make nothing
#   scripts/torch2-env.sh --remove   remove every such environment of this machine (any pins)
#
# Where: $CPPARITY_ENV_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/cpparity, in a folder
# torch2-<key>, the key a digest of the constraints file and the base python's version, so a
# change of pins makes a new folder beside the old one (--remove clears both). About 5.5 GB: the
# registry's torch is its CUDA build, which runs on the CPU. Made once per machine: about 3 GB
# downloaded, a few minutes; pip's own cache is not used (it would hold the 3 GB twice).
# Two callers at once (ctest -j) wait on one lock; an interrupted install leaves no folder that
# looks complete (a .complete stamp is written last).
#
# Base python: $CPPARITY_BASE_PYTHON, default Debian's /usr/bin/python3 (3.11), with python3-venv.
# Exit 0: ready. Exit 77: it cannot be made here (no venv module, no network, pip refused), with
# pip's own last lines on stderr, so a test that needs it skips with that reason. Exit 2: usage.
set -u
here=$(cd "$(dirname "$0")" && pwd)
constraints=$here/torch2-constraints.txt
base_python=${CPPARITY_BASE_PYTHON:-/usr/bin/python3}
root=${CPPARITY_ENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cpparity}

cannot() { # REASON [LOG]: exit 77 with the reason and pip's errors and warnings (else the last lines)
    echo "torch2-env: cannot make the PyTorch 2 environment: $1" >&2
    if [ $# -gt 1 ] && [ -f "$2" ]; then
        grep -E '^(ERROR|WARNING)' "$2" | head -6 >&2 || tail -8 "$2" >&2
        echo "torch2-env: the whole log: $2" >&2
    fi
    exit 77
}

python_version=$("$base_python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>&1) ||
    cannot "no base python $base_python ($python_version)"
key=$( (cat "$constraints"; echo "python $python_version") | sha256sum | cut -c1-12)
env_dir=$root/torch2-$key

case "${1:-}" in
"") ;;
--where) echo "$env_dir"; exit 0 ;;
--remove)
    for dir in "$root"/torch2-*; do
        [ -e "$dir" ] || continue
        echo "removing $dir" >&2
        rm -rf "$dir"
    done
    exit 0 ;;
*) echo "usage: scripts/torch2-env.sh [--where | --remove]" >&2; exit 2 ;;
esac

mkdir -p "$root" || cannot "cannot make $root"
exec 9> "$env_dir.lock" || cannot "cannot write the lock $env_dir.lock"
if ! flock -n 9; then
    echo "torch2-env: waiting for another process making $env_dir" >&2
    flock 9
fi
if [ -f "$env_dir/.complete" ] && [ -x "$env_dir/bin/python" ]; then
    echo "$env_dir/bin/python"
    exit 0
fi

rm -rf "$env_dir"
log=$env_dir.log
start=$SECONDS
echo "torch2-env: making $env_dir (pins: $constraints); about 3 GB to download, once" >&2
"$base_python" -m venv "$env_dir" > "$log" 2>&1 ||
    { rm -rf "$env_dir"; cannot "$base_python -m venv failed (Debian: apt install python3-venv)" "$log"; }
python=$env_dir/bin/python
pip=("$python" -m pip install --disable-pip-version-check --no-cache-dir --retries 2
     --progress-bar off -c "$constraints")
# torch first, then the rest without build isolation: DeepSpeed builds from its sdist, whose
# setup.py imports torch; an isolated build would download a second torch for it.
if ! "${pip[@]}" torch numpy h5py setuptools wheel pytest >> "$log" 2>&1 ||
   ! DS_BUILD_OPS=0 "${pip[@]}" --no-build-isolation deepspeed transformers accelerate \
       >> "$log" 2>&1; then
    rm -rf "$env_dir"
    cannot "pip install -c $constraints failed:" "$log"
fi
if ! DS_ACCELERATOR=cpu "$python" - "$constraints" >> "$log" 2>&1 <<'PY'; then
import importlib, importlib.metadata, sys
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if line:
        name, version = line.split("==")
        importlib.import_module(name)
        have = importlib.metadata.version(name)
        if have != version:
            sys.exit(f"{name} {have} installed, {version} pinned")
PY
    rm -rf "$env_dir"
    cannot "the installed packages do not import at their pins:" "$log"
fi
"$python" -m pip freeze > "$env_dir/pip-freeze.txt" 2>/dev/null
touch "$env_dir/.complete"
echo "torch2-env: made $env_dir in $((SECONDS - start)) s, $(du -sh "$env_dir" | cut -f1)" >&2
echo "$python"
