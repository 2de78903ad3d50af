#!/usr/bin/env bash
# check_device_script.sh SOURCE_DIR — the one-call GPU check, tried where there is no GPU: on a
# copy of the tree as the device tool would carry it (tracked and untracked-not-ignored files),
# scripts/device-bundle.sh, then scripts/device-check.sh --no-gpu-ok. Fails when any row FAILED,
# a build row did not PASS, a device row did not SKIP with its reason, OUT holds more than the
# 8 files the device tool brings back (or anything deeper than it brings back), or the bundle is
# 48 MiB or more (the tool carries 64 MiB in all, the tree included). Exit 77 (skipped) without
# nvcc, which the script's builds need.
set -uo pipefail
source_dir=$(cd "${1:?usage: check_device_script.sh SOURCE_DIR}" && pwd)
export PATH=$PATH:/usr/local/cuda/bin
if ! command -v nvcc > /dev/null; then
  echo "SKIPPED: no nvcc on PATH or in /usr/local/cuda/bin: the device check's builds need it"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# the tree as the device tool carries it
tree=$work/tree
mkdir -p "$tree"
if ! files=$(cd "$source_dir" && git ls-files -z --cached --others --exclude-standard | tr '\0' '\n'); then
  echo "SKIPPED: $source_dir is not a git checkout: the copy the device tool carries is made by git"
  exit 77
fi
(cd "$source_dir" && tr '\n' '\0' <<< "$files" | xargs -0 cp --parents -P -t "$tree" 2> /dev/null)
[ -x "$tree/scripts/device-check.sh" ] || fail "the copy of the tree has no scripts/device-check.sh"

echo "== scripts/device-bundle.sh"
"$tree/scripts/device-bundle.sh" || fail "scripts/device-bundle.sh failed"
bundle_kib=$(du -sk "$tree/.device-bundle" | cut -f1)
echo "bundle: $((bundle_kib / 1024)) MiB"
[ "$bundle_kib" -lt $((48 * 1024)) ] ||
  fail ".device-bundle is $((bundle_kib / 1024)) MiB, not under 48 MiB (the carry limit is 64 MiB)"

echo "== scripts/device-check.sh --no-gpu-ok"
out=$work/out
"$tree/scripts/device-check.sh" --no-gpu-ok --budget 1100 "$out"
code=$?
echo "== device-check.log (last lines)"
tail -30 "$out/device-check.log" 2> /dev/null
[ $code = 0 ] || fail "device-check.sh --no-gpu-ok exited $code"

table=$out/device-check.md
[ -s "$table" ] || fail "no device-check.md in OUT"
files=$(find "$out" -type f | wc -l)
[ "$files" -le 8 ] || fail "OUT holds $files files; the device tool brings back 8"
deep=$(find "$out" -mindepth 3 | head -1)
[ -z "$deep" ] || fail "OUT holds $deep, deeper than the device tool brings back"
grep -q '| FAIL |' "$table" && fail "a row FAILED: $(grep '| FAIL |' "$table")"
builds=$(grep -c '^| [a-z0-9-]* | build | PASS |' "$table")
devices=$(grep -c '^| [a-z0-9-]* | device | SKIP | 0 | - | no CUDA device' "$table")
[ "$builds" -ge 4 ] || fail "only $builds build rows passed"
[ "$devices" -ge 10 ] || fail "only $devices device rows skipped with the no-device reason"
echo "device-script: $builds build rows PASS, $devices device rows SKIP with the reason, $files files in OUT"
