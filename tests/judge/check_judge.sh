#!/usr/bin/env bash
# check_judge.sh CPPARITY SOURCE_DIR PYTHON — `cpparity judge` end to end, as a framework author
# uses it: `cpparity export` of CI cases, rank dumps written with python/cpparity_dump.py by
# tests/judge/make_dumps.py (a "framework" whose outputs are the float64 reference rounded to the
# dtype, so a correct run must pass), then
#   - every layout (contiguous, zigzag, round-robin), cp 1, 2 and 4, gradients in full and in
#     slices, f32 and bf16, with and without the framework's own cp = 1 dump as --baseline: exit 0,
#     and the results file reads in `cpparity report` and `cpparity diff`;
#   - each planted framework bug (make_dumps.py --wrong): exit 1, naming the tensor and the rank;
#   - each malformed dump (--malformed): exit 2, naming the file and the HDF5 path;
#   - a tampered export, an export that is not HDF5, no dumps, an existing --out: exit 2;
#   - scripts/nightly.sh judging a framework's dumps (CPPARITY_NIGHTLY_JUDGE), night after night.
# Exit 0 when all of that holds, 1 at the first surprise.
set -u
cpparity=$1
source_dir=$2
python=$3
make_dumps=$source_dir/tests/judge/make_dumps.py
work=$(mktemp -d /tmp/cpparity-judge-XXXXXX)
trap 'rm -rf "$work"' EXIT
checks=0
# fail, dumps and judge
source "$source_dir/tests/judge/judge_steps.sh"

# A case with left and right padding in one batch (fully masked rows, automatic padding at cp 4
# is none: S = 16), and one with packed documents across rank boundaries.
for case in full-left-and-right-padding-in-one-batch packed-documents-spanning-ranks-with-length-1; do
    rm -f "$work/export.h5"
    "$cpparity" export "$source_dir/cases/ci.yaml" --case "$case" -o "$work/export.h5" \
        > "$work/export.out" 2>&1 || fail "export of $case"
    for dtype in f32 bf16; do
        dumps "$work/cp1" --cp 1 --dtype "$dtype"
        judge 0 "$work"/cp1/rank_*.h5
        for spec in "2 zigzag full" "2 contiguous slices" "4 round-robin full" "4 zigzag slices" \
            "4 contiguous full"; do
            read -r cp layout gradients <<< "$spec"
            dumps "$work/run" --cp "$cp" --layout "$layout" --gradients "$gradients" --dtype "$dtype"
            judge 0 "$work"/run/rank_*.h5
            grep -q "# layout: $layout (cp $cp" "$work/judge.out" ||
                fail "$case $dtype $spec: the layout is not named $layout"
            grep -q "# discrimination: [1-9]" "$work/judge.out" ||
                fail "$case $dtype $spec: no discrimination check"
            judge 0 "$work"/run/rank_*.h5 --baseline "$work/cp1/rank_0.h5"
            # the results file names the layout and keeps each non-consecutive rank's positions and
            # each position's own limit
            "$python" - "$work/judged.h5" "$work/run" "$layout" "$cp" "$dtype" > "$work/layout.out" 2>&1 <<'EOF_PY' ||
import sys, h5py, numpy as np
path, dumps, layout, cp, dtype = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
with h5py.File(path, "r") as results:
    case = next(iter(results["cases"].values()))
    item = case[dtype][f"cp_{cp}"]
    recorded = item.attrs["token_layout"].decode()
    assert recorded == layout, f"token_layout {recorded!r}, expected {layout!r}"
    for rank in range(cp):
        with h5py.File(f"{dumps}/rank_{rank}.h5", "r") as dump:
            held = dump["token_indices"][0]
        profile = item["profiles"][f"logits@rank{rank}"]
        name = f"positions@rank{rank}"
        if np.array_equal(held, held[0] + np.arange(len(held))):
            assert profile.attrs["position_offset"] == held[0], f"rank {rank}: position_offset"
            assert name not in item["profiles"], f"rank {rank}: consecutive rows, yet {name}"
        else:
            assert profile.attrs["position_offset"] == -1, f"rank {rank}: position_offset"
            assert np.array_equal(item["profiles"][name][()], held), f"rank {rank}: {name}"
        # each position's own limit beside its error: none where nothing is compared, and a
        # passing run's every position within it
        errors, limits = profile[()], item["profiles"][f"limits@rank{rank}"][()]
        assert limits.shape == errors.shape, f"rank {rank}: limits {limits.shape}"
        assert np.array_equal(np.isnan(limits), np.isnan(errors)), f"rank {rank}: limits' NaNs"
        compared = ~np.isnan(errors)
        assert np.all(limits[compared] > 0), f"rank {rank}: a limit not positive"
        assert np.all(errors[compared] <= limits[compared]), f"rank {rank}: over its own limit"
EOF_PY
                fail "$case $dtype $spec: $(tail -1 "$work/layout.out")"
        done
    done
done
"$cpparity" report "$work/judged.h5" -o "$work/judged.html" > "$work/report.out" 2>&1 ||
    fail "cpparity report cannot read a judge's results file"
"$cpparity" diff "$work/judged.h5" "$work/judged.h5" > "$work/diff.out" 2>&1 ||
    fail "cpparity diff cannot read a judge's results file"

# Planted framework bugs: exit 1, the failing tensor and rank named (f32: bf16's wider limits
# could hide 1e-2 noise).
for spec in "logits-rows-swapped logits rank 1" "zigzag-second-chunk-reversed logits rank 0" \
    "gradient-not-reduced grads/model.layers.0.self_attn.q_proj.weight rank 1" \
    "loss-mean-of-means loss rank" "logits-noise logits rank 0"; do
    read -r wrong tensor rank <<< "$spec"
    dumps "$work/wrong" --cp 2 --layout zigzag --wrong "$wrong"
    judge 1 "$work"/wrong/rank_*.h5
    grep -q "FAIL $tensor $rank" "$work/judge.out" ||
        fail "--wrong $wrong: the output does not say 'FAIL $tensor $rank'"
done

# Malformed dumps: exit 2, the file and the HDF5 path named.
for spec in "missing-rank no dump of rank 1" "duplicate-rank both are rank 0" \
    "cp-disagree rank_1.h5: /: cp 3" "wrong-digest rank_0.h5: /: a dump of another export or seed" \
    "wrong-version rank_0.h5: /: format_version 2" "missing-gradient rank_0.h5: /gradients/" \
    "extra-gradient rank_0.h5: /gradients/bogus" "wrong-logits-shape rank_0.h5: /logits: shape" \
    "indices-overlap /token_indices: the ranks' positions do not partition" \
    "indices-out-of-range rank_1.h5: /token_indices" "not-a-dump rank_0.h5: /: not a cpparity" \
    "slices-hole /gradient_slices/"; do
    read -r malformed message <<< "$spec"
    dumps "$work/bad" --cp 2 --layout zigzag --malformed "$malformed"
    judge 2 "$work"/bad/rank_*.h5
    grep -qF -- "$message" "$work/judge.out" ||
        fail "--malformed $malformed: the message does not say '$message'"
    [ ! -e "$work/judged.h5" ] || fail "--malformed $malformed: a results file was written"
done

# The export itself, the command line and the outputs.
dumps "$work/run" --cp 2
cp "$work/export.h5" "$work/tampered.h5"
"$python" -c 'import h5py, sys; h5py.File(sys.argv[1], "r+")["/model"].attrs["seed"] = 7' \
    "$work/tampered.h5"
"$cpparity" judge "$work/tampered.h5" "$work"/run/rank_*.h5 --out "$work/t.h5" > "$work/judge.out" 2>&1
[ $? = 2 ] && grep -q "tampered.h5: /model: digest" "$work/judge.out" ||
    fail "a tampered export is not refused naming /model"
echo "not HDF5" > "$work/text.h5"
"$cpparity" judge "$work/text.h5" "$work"/run/rank_*.h5 --out "$work/t.h5" > "$work/judge.out" 2>&1
[ $? = 2 ] && grep -q "text.h5: not an HDF5 file" "$work/judge.out" || fail "a text export"
"$cpparity" judge "$work/export.h5" > "$work/judge.out" 2>&1
[ $? = 2 ] && grep -q "missing the rank dumps" "$work/judge.out" || fail "no dumps"
touch "$work/exists.h5"
"$cpparity" judge "$work/export.h5" "$work"/run/rank_*.h5 --out "$work/exists.h5" \
    > "$work/judge.out" 2>&1
[ $? = 2 ] && grep -q -- "--out $work/exists.h5" "$work/judge.out" || fail "an existing --out"
checks=$((checks + 4))

# String attributes as numpy's fixed-length, null-padded bytes (no terminator: h5py writes
# np.bytes_ so) are read whole: the digest matches, the framework's name keeps its last letter.
dumps "$work/padded" --cp 2 --layout zigzag
"$python" - "$work"/padded/rank_*.h5 <<'EOF_PY' || fail "rewriting the dumps' string attributes"
import sys, h5py, numpy as np
for path in sys.argv[1:]:
    with h5py.File(path, "r+") as dump:
        for name in ("framework", "export_digest", "kernel"):
            value = dump.attrs[name]
            text = value.decode() if isinstance(value, bytes) else str(value)
            dump.attrs[name] = np.bytes_(text.encode())
            assert dump.attrs.get_id(name).get_type().get_strpad() == h5py.h5t.STR_NULLPAD
EOF_PY
judge 0 "$work"/padded/rank_*.h5
framework=$("$python" -c 'import h5py, sys; v = h5py.File(sys.argv[1])["/"].attrs["framework"]; print(v.decode() if isinstance(v, bytes) else v)' "$work/padded/rank_0.h5")
grep -q "framework $framework " "$work/judge.out" ||
    fail "a null-padded framework name '$framework' is not read whole: $(grep '# layout' "$work/judge.out")"

# A framework's nightly job: scripts/nightly.sh with CPPARITY_NIGHTLY_JUDGE, twice on correct
# dumps (exit 0, no regression), then on dumps with a bug (exit 1, a new failure in the diff).
export CPPARITY="$cpparity"
dumps "$work/night" --cp 2 --layout zigzag
export CPPARITY_NIGHTLY_JUDGE="$work/export.h5 $work/night/rank_*.h5"
for night in 1 2; do
    "$source_dir/scripts/nightly.sh" "$work/nights" > "$work/night-$night.out" 2>&1 ||
        fail "nightly.sh judging correct dumps, night $night"
done
grep -q "NO REGRESSION" "$work/night-2.out" || fail "the second night's diff"
dumps "$work/night" --cp 2 --layout zigzag --wrong logits-noise
"$source_dir/scripts/nightly.sh" "$work/nights" > "$work/night-3.out" 2>&1
[ $? = 1 ] && grep -q "new failure" "$work"/nights/latest.diff.md ||
    fail "nightly.sh judging dumps with a bug: exit 1 and a new failure expected"
checks=$((checks + 3))
echo "judge: $checks checks passed"
