#!/usr/bin/env bash
# check_python_package.sh SOURCE_DIR [BASE_PYTHON] — python/ is an installable package:
# `pip install ./python` into a fresh venv (offline: --no-index --no-build-isolation, Debian's
# setuptools, numpy and h5py through --system-site-packages; --no-deps, because Debian registers
# its h5py as the distribution "h5py._debian_h5py_serial", which pip does not count as h5py)
# installs `cpparity-dump`, whose
# declared dependencies are numpy and h5py and nothing else; `import cpparity_dump` (and
# cpparity_kernel) then works
# from outside the clone and comes from the venv's site-packages, not from the clone; the
# installed module is the clone's file, byte for byte; `pip uninstall` removes it again. Exit 0
# when all holds, 1 otherwise, 77 (skip) when BASE_PYTHON cannot make a venv with pip. About 10 s.
set -u
source_dir=$(cd "$1" && pwd)
base_python=${2:-/usr/bin/python3}
work=$(mktemp -d /tmp/cpparity-python-package-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; for f in "$work"/*.out; do echo "--- $f"; tail -8 "$f"; done; exit 1; }

"$base_python" -m venv --system-site-packages "$work/venv" > "$work/venv.out" 2>&1 ||
    { echo "SKIP: $base_python cannot make a venv with pip (Debian: python3-venv):"
      tail -3 "$work/venv.out"; exit 77; }
python=$work/venv/bin/python
# the source is copied so that the build's egg-info and build/ folders stay out of the clone
cp -r "$source_dir/python" "$work/source"
"$python" -m pip install --disable-pip-version-check --no-index --no-build-isolation --no-deps \
    "$work/source" > "$work/install.out" 2>&1 || fail "pip install ./python"
cd "$work" || fail "cd $work"
"$python" - "$source_dir/python" "$work/venv" > "$work/import.out" 2>&1 <<'PY' ||
import filecmp, importlib.metadata, os, sys
import cpparity_dump, cpparity_kernel
for module in (cpparity_dump, cpparity_kernel):
    where = os.path.realpath(module.__file__)
    clone = os.path.join(sys.argv[1], os.path.basename(where))
    assert where.startswith(os.path.realpath(sys.argv[2])), f"imported from {where}, not the venv"
    assert filecmp.cmp(where, clone, shallow=False), f"{where} differs from {clone}"
requires = sorted(r.split(";")[0].strip() for r in importlib.metadata.requires("cpparity-dump"))
assert requires == ["h5py", "numpy"], f"declared dependencies {requires}"
assert cpparity_dump.DUMP_FORMAT_VERSION == 1 and cpparity_kernel.DUMP_FORMAT_VERSION == 1
print(f"cpparity-dump {importlib.metadata.version('cpparity-dump')} (cpparity_dump, "
      f"cpparity_kernel) from {os.path.dirname(where)}, requires {', '.join(requires)}")
PY
    fail "import cpparity_dump from the installed package"
cat "$work/import.out"
"$python" -m pip uninstall --disable-pip-version-check -y cpparity-dump > "$work/uninstall.out" 2>&1 ||
    fail "pip uninstall cpparity-dump"
if "$python" -c "import cpparity_dump" > /dev/null 2>&1 ||
    "$python" -c "import cpparity_kernel" > /dev/null 2>&1; then
    fail "cpparity_dump or cpparity_kernel still imports after pip uninstall"
fi
echo "OK: pip install ./python, import from the venv, uninstall"
