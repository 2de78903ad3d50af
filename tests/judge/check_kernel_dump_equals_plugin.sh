#!/usr/bin/env bash
# check_kernel_dump_equals_plugin.sh CPPARITY PLUGIN_DIR SOURCE_DIR [PYTHON] — the kernel-dump route
# (docs/dump-format.md, "The kernel dump") gives the verdicts of the plugin route, tensor for
# tensor: each example plugin (examples/kernel-plugin: the right one, its planted bugs, the one
# without sliding windows) is called from Python through ctypes on cases/kernels.yaml's export
# (plugin_kernel_dump.py, outputs poisoned with NaN as cpparity poisons a plugin's), its dump
# judged with `cpparity judge`, the plugin itself run with `cpparity run --kernel`, and the two
# results files must agree on every item's outcome and message and every tensor's error, limit
# and worst coordinates (compare_judgements.py), exit codes included. Bug 5 (a static workspace
# under concurrent calls) is left out: a dump holds one serial call, so concurrency cannot be
# judged from it. Then the refusals (exit 2, file and HDF5 path named): a dump of another export,
# a missing layer, a damaged dump, a kernel dump given to a model-level export's judge.
set -uo pipefail
cpparity=$1 plugins=$2 source_dir=$3
python=${4:-/usr/bin/python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/cpparity-kernel-dump.XXXXXX")
trap 'rm -rf "$work"' EXIT
source "$source_dir/tests/judge/example_steps.sh"
tool=$source_dir/tests/judge

"$cpparity" export "$source_dir/cases/kernels.yaml" -o "$work/kernels.h5" > "$work/export.out" 2>&1 ||
    fail "export of cases/kernels.yaml"
# the planted bugs on cases that show each of them (a prime length, a fully masked row, every mask
# on one batch, block edges on document boundaries, many tiles, a window of 1, chunks of 1, a
# tile-edge window for bug 4): a third of the whole suite's time; the right plugins on all of it
planted_cases=()
for case in prime-length-37 all-padding-row every-mask-on-a-mixed-batch \
    block-edges-on-document-boundaries many-tiles-257 window-1 \
    chunk-1-and-chunks-across-documents tile-edges.31; do
    planted_cases+=(--case "$case")
done
"$cpparity" export "$source_dir/cases/kernels.yaml" "${planted_cases[@]}" -o "$work/planted.h5" \
    > "$work/export.out" 2>&1 || fail "export of cases/kernels.yaml's planted cases"
# plugin, the exit code both routes must give
for variant in ":0" "_bug1:1" "_bug2:1" "_bug3:1" "_bug4:1" "_bug6:1" "_bug7:1" "_bug8:1" \
    "_bug9:1" "_no_sliding:0"; do
    name=${variant%%:*} expected=${variant##*:}
    plugin=$plugins/libnaive_attention$name.so
    export=$work/kernels.h5 cases=()
    if [ "$expected" = 1 ]; then
        export=$work/planted.h5 cases=("${planted_cases[@]}")
    fi
    "$python" "$tool/plugin_kernel_dump.py" "$plugin" "$export" "$work/dump$name.h5" \
        > "$work/dump.out" 2>&1 || fail "plugin_kernel_dump.py $plugin"
    "$cpparity" judge "$export" "$work/dump$name.h5" --out "$work/judged$name.h5" \
        > "$work/judge.out" 2>&1
    code=$?
    [ $code = "$expected" ] || fail "judge of naive_attention$name's dump: exit $code, expected $expected"
    "$cpparity" run "$source_dir/cases/kernels.yaml" "${cases[@]}" --kernel "$plugin" \
        --out "$work/run$name.h5" > "$work/run.out" 2>&1
    code=$?
    [ $code = "$expected" ] || fail "run --kernel naive_attention$name: exit $code, expected $expected"
    "$python" "$tool/compare_judgements.py" "$work/judged$name.h5" "$work/run$name.h5" \
        > "$work/compare.out" 2>&1 || fail "naive_attention$name: judge and run differ"
    echo "naive_attention$name: exit $expected both ways, $(cat "$work/compare.out")"
done

refused() { # WHAT PATTERN ARGS...: cpparity judge ARGS must exit 2 saying PATTERN
    local what=$1 pattern=$2
    shift 2
    "$cpparity" judge "$@" --out "$work/refused.h5" > "$work/refused.out" 2>&1
    local code=$?
    [ $code = 2 ] || fail "$what: exit $code, expected 2"
    grep -q -- "$pattern" "$work/refused.out" || fail "$what: no '$pattern' in the refusal"
    [ ! -e "$work/refused.h5" ] || fail "$what: a results file was written"
    echo "refused, $what: $(head -1 "$work/refused.out")"
}
"$cpparity" export --random 3 --seed 11 -o "$work/random.h5" > "$work/export.out" 2>&1 ||
    fail "export --random 3"
refused "a dump of another export" "a dump of another export" "$work/random.h5" "$work/dump.h5"
"$python" - "$work/dump.h5" "$work/holed.h5" <<'PYTHON' || fail "making a dump with a hole"
import shutil, sys, h5py
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "r+") as dump:
    del dump["cases/prime-length-37/layers/1/dq"]
PYTHON
refused "a missing dataset" "holed.h5: /cases/prime-length-37/layers/1/dq: missing" \
    "$work/kernels.h5" "$work/holed.h5"
head -c 4096 "$work/dump.h5" > "$work/truncated.h5"
refused "a truncated dump" "truncated.h5" "$work/kernels.h5" "$work/truncated.h5"
refused "two kernel dumps" "takes one KERNEL_DUMP.h5" "$work/kernels.h5" "$work/dump.h5" \
    "$work/dump_bug1.h5"
"$cpparity" export "$source_dir/cases/ci.yaml" --case full-no-padding -o "$work/model.h5" \
    > "$work/export.out" 2>&1 || fail "export of a model-level case"
refused "a kernel dump judged against a model-level export" "a kernel dump is judged against the" \
    "$work/model.h5" "$work/dump.h5"
echo "PASS"
