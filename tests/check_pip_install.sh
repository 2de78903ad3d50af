#!/usr/bin/env bash
# check_pip_install.sh CPPARITY SOURCE_DIR PYTHON — `pip install .` of a copy of the source tree
# (its tracked and new files, no build folders) into a fresh venv, through the root
# pyproject.toml and scikit-build-core (pinned, from PyPI: skipped, with pip's reason, where it
# cannot be installed) with the command already built here installed in place of building it
# again (CPPARITY_PREBUILT_COMMAND; docs/python.md measures the full build):
#   - the venv's bin/cpparity runs (--version), and `python -m cpparity` runs it;
#   - `import cpparity`, `cpparity_dump` and `cpparity_kernel` work outside the source tree and
#     come from the venv; cpparity.find_command() is the venv's command; the pytest plugin is
#     registered (entry point pytest11 "cpparity");
#   - without OpenBLAS (pkg-config finding nothing) the install stops naming the Debian package
#     to install.
# Exit 0 when all holds, 1 otherwise, 77 (skip) when no venv or no scikit-build-core. About 40 s.
set -u
cpparity=$(realpath "$1") source_dir=$(cd "$2" && pwd) python=$3
work=$(mktemp -d /tmp/cpparity-pip-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; for f in "$work"/*.out; do echo "--- $f"; tail -15 "$f"; done; exit 1; }
"$python" -m venv --system-site-packages "$work/venv" > "$work/venv.out" 2>&1 ||
    { echo "SKIP: $python cannot make a venv:"; tail -3 "$work/venv.out"; exit 77; }
pip=("$work/venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install -q "scikit-build-core==1.1.2" > "$work/skbuild.out" 2>&1 ||
    { echo "SKIP: pip cannot install scikit-build-core 1.1.2:"; tail -3 "$work/skbuild.out"; exit 77; }
mkdir "$work/source"
(cd "$source_dir" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$work/source") ||
    fail "copying the source tree"
"${pip[@]}" install --no-build-isolation --no-deps \
    --config-settings=cmake.define.CPPARITY_PREBUILT_COMMAND="$cpparity" \
    --config-settings=build.targets=cpparity_prebuilt "$work/source" > "$work/install.out" 2>&1 ||
    fail "pip install ."
"$work/venv/bin/cpparity" --version > "$work/version.out" 2>&1 || fail "bin/cpparity --version"
grep -q "^cpparity [0-9]" "$work/version.out" || fail "bin/cpparity --version says no version"
cd / || fail "cd /"
"$work/venv/bin/python" -m cpparity --version > "$work/module.out" 2>&1 ||
    fail "python -m cpparity --version"
"$work/venv/bin/python" - "$work/venv" > "$work/import.out" 2>&1 << 'EOF_PY' || fail "imports"
import importlib.metadata, os, sys
import cpparity, cpparity_dump, cpparity_kernel
venv = os.path.realpath(sys.argv[1])
for module in (cpparity, cpparity_dump, cpparity_kernel):
    assert os.path.realpath(module.__file__).startswith(venv), f"{module.__name__} from {module.__file__}"
assert os.path.realpath(cpparity.find_command()) == os.path.join(venv, "bin", "cpparity"), \
    cpparity.find_command()
plugins = [e.value for e in importlib.metadata.entry_points(group="pytest11") if e.name == "cpparity"]
assert plugins == ["cpparity.pytest_plugin"], plugins
print("imported from", venv)
EOF_PY
rm -rf "$work/venv-missing"
"$python" -m venv --system-site-packages "$work/venv-missing" > /dev/null 2>&1 || fail "second venv"
cp -r "$work"/venv/lib/python3*/site-packages/scikit_build_core* "$work"/venv-missing/lib/python3*/site-packages/ 2>/dev/null
"$work/venv-missing/bin/python" -m pip install -q --disable-pip-version-check "scikit-build-core==1.1.2" > /dev/null 2>&1
PKG_CONFIG_LIBDIR=$work/nothing PKG_CONFIG_PATH= "$work/venv-missing/bin/python" -m pip \
    install --disable-pip-version-check --no-build-isolation --no-deps "$work/source" \
    > "$work/missing.out" 2>&1 && fail "pip install . succeeds without OpenBLAS"
grep -q "apt-get install libopenblas-dev" "$work/missing.out" ||
    fail "the failed install does not name the Debian package libopenblas-dev"
echo "OK: pip install . puts $(head -1 "$work/version.out") in the venv's bin/, imports from the venv," \
    "registers the pytest plugin; without OpenBLAS it names libopenblas-dev"
