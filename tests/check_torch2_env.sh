#!/usr/bin/env bash
# check_torch2_env.sh SOURCE_DIR — scripts/torch2-env.sh, the pinned PyTorch 2 environment, on
# its cheap paths (the real install is what the external/ tests use, once per machine):
#   - its folder is keyed by the pins: a copy of the script beside a constraints file with one
#     pin changed answers --where with another folder, under $CPPARITY_ENV_CACHE;
#   - where the registry cannot be reached (PIP_INDEX_URL at a closed local port, no find-links)
#     it exits 77 naming the constraints file and showing pip's own last lines, and leaves no
#     folder behind (so the next call starts afresh, and nothing looks complete);
#   - --remove removes every torch2-* folder of the cache, whatever its pins;
#   - a base python that does not exist: exit 77 naming it.
# Exit 0 when all holds, 1 otherwise. About 10 s (a venv is made, pip fails at once).
set -u
source_dir=$(cd "$1" && pwd)
work=$(mktemp -d /tmp/cpparity-torch2-env-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; for f in "$work"/*.out; do echo "--- $f"; tail -8 "$f"; done; exit 1; }
export CPPARITY_ENV_CACHE=$work/cache

mkdir -p "$work/copy"
cp "$source_dir/scripts/torch2-env.sh" "$work/copy/"
sed 's/^torch==.*/torch==2.0.0/' "$source_dir/scripts/torch2-constraints.txt" \
    > "$work/copy/torch2-constraints.txt"
ours=$("$source_dir/scripts/torch2-env.sh" --where) || fail "--where"
theirs=$("$work/copy/torch2-env.sh" --where) || fail "--where of the copy"
case $ours in "$CPPARITY_ENV_CACHE"/torch2-*) ;; *) fail "--where: $ours is not under the cache" ;; esac
[ "$ours" != "$theirs" ] || fail "another torch pin gives the same folder $ours"
echo "keyed by the pins: $(basename "$ours") and $(basename "$theirs")"

PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_FIND_LINKS= PIP_RETRIES=0 PIP_TIMEOUT=2 \
    "$source_dir/scripts/torch2-env.sh" > "$work/offline.out" 2> "$work/offline-stderr.out"
code=$?
[ $code = 77 ] || fail "registry unreachable: exit $code, expected 77"
grep -q "cannot make the PyTorch 2 environment: pip install -c .*torch2-constraints.txt failed" \
    "$work/offline-stderr.out" || fail "registry unreachable: the reason is not given"
grep -q "Connection refused" "$work/offline-stderr.out" ||
    fail "registry unreachable: pip's own reason is not shown"
[ ! -e "$ours" ] || fail "a failed install left $ours behind"
echo "registry unreachable: exit 77, pip: $(grep -m1 -o "Connection refused" "$work/offline-stderr.out")"

mkdir -p "$ours" "$theirs"
"$source_dir/scripts/torch2-env.sh" --remove 2> "$work/remove.out" || fail "--remove"
[ ! -e "$ours" ] && [ ! -e "$theirs" ] || fail "--remove left a folder"

CPPARITY_BASE_PYTHON=$work/no-such-python "$source_dir/scripts/torch2-env.sh" \
    > /dev/null 2> "$work/nopython.out"
code=$?
[ $code = 77 ] && grep -q "no base python $work/no-such-python" "$work/nopython.out" ||
    fail "a missing base python: exit $code"
echo "OK: torch2-env.sh keyed by its pins, exit 77 with pip's reason, --remove"
