#!/usr/bin/env bash
# check_judge_usability.sh CPPARITY SOURCE_DIR PYTHON — `cpparity judge` (and `run`) as a
# framework's test meets them, case after case (issue 33):
#   - default outputs never collide: judges and runs started together, without --out, all exit 0
#     with distinct results files that sort by start time;
#   - any padded length: S = 17 padded to 64 at cp 1, 2 and 4 (contiguous, zigzag, round-robin)
#     passes; the padding is excluded from the logits error (B·(Sp − S)·V more excluded elements
#     than without padding) and NaN-checked (a NaN at position 63 fails, named); a padded length
#     past the bound that --max-memory sets is refused (exit 2) saying so, with nothing written;
#   - a baseline dump that is not cp 1 is refused naming --baseline and what was given;
#   - a dump of another export is refused as such before its shapes are looked at;
#   - an empty framework_version leaves no stray space;
#   - --reference-cache makes its folder and reuses what it stored, as `run`'s does.
# Exit 0 when all of that holds, 1 at the first surprise.
set -u
cpparity=$(realpath "$1") # absolute: part of it runs in another folder
source_dir=$(realpath "$2")
python=$3
make_dumps=$source_dir/tests/judge/make_dumps.py
work=$(mktemp -d /tmp/cpparity-judge-usability-XXXXXX)
trap 'rm -rf "$work"' EXIT
checks=0
# fail, dumps and judge
source "$source_dir/tests/judge/judge_steps.sh"
excluded() { # RESULTS.h5 CP: the item's logits_excluded
    "$python" -c 'import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    case = next(iter(f["cases"].values()))
    print(int(case["f32"]["cp_" + sys.argv[2]].attrs["logits_excluded"]))' "$1" "$2"
}

# S = 17, left padding in one row: automatic padding and fully masked rows
"$cpparity" export "$source_dir/cases/ci.yaml" --case autopad-length-17 -o "$work/export.h5" \
    > "$work/export.out" 2>&1 || fail "export of autopad-length-17"
read -r batch seq_len vocab < <("$python" -c 'import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    b, s, v = f["reference/logits"].shape
    print(b, s, v)' "$work/export.h5") || fail "reading the export's shape"
[ "$seq_len" = 17 ] || fail "autopad-length-17 has S = $seq_len"

# --- 1. default outputs: started together, without --out ----------------------------------------
dumps "$work/run" --cp 2 --layout zigzag
mkdir -p "$work/cwd"
(
    cd "$work/cwd" || exit 1
    for i in 1 2 3; do
        "$cpparity" judge "$work/export.h5" "$work"/run/rank_*.h5 > "judge-$i.out" 2>&1 &
    done
    for i in 1 2; do # two runs of one tiny case; --ranks 1 (cp 1 items)
        "$cpparity" run "$source_dir/cases/ci.yaml" --case full-no-padding --dtype f32 \
            --comm local --ranks 1 --allow-not-run > "run-$i.out" 2>&1 &
    done
    code=0
    for job in $(jobs -p); do wait "$job" || code=1; done
    exit $code
) || fail "a judge or run started together with others without --out did not exit 0: $(cat "$work"/cwd/*.out | grep -v '^#' | head -5)"
judged=$(ls "$work/cwd/results" | grep -c '^judge-.*\.h5$')
ran=$(ls "$work/cwd/results" | grep -v '^judge-' | grep -c '\.h5$')
[ "$judged" = 3 ] && [ "$ran" = 2 ] ||
    fail "3 judges and 2 runs wrote $judged and $ran results files: $(ls "$work/cwd/results")"
for i in 1 2 3; do # each judge names its own file, and it is a results file
    path=$(sed -n 's/^# results: //p' "$work/cwd/judge-$i.out")
    [ -f "$work/cwd/$path" ] || fail "judge $i: its results file '$path' is not there"
done
# sorting by name is sorting by start time: the time comes first, fixed width
first=$(ls "$work/cwd/results" | grep '^judge-' | head -1)
sleep 0.01
(cd "$work/cwd" && "$cpparity" judge "$work/export.h5" "$work"/run/rank_*.h5 > judge-4.out 2>&1) ||
    fail "a fourth judge"
last=$(ls "$work/cwd/results" | grep '^judge-' | tail -1)
[ "$last" = "$(sed -n 's|^# results: results/||p' "$work/cwd/judge-4.out")" ] && [ "$first" != "$last" ] ||
    fail "the newest default name does not sort last: $(ls "$work/cwd/results")"
checks=$((checks + 3))

# --- 2. any padded length: S = 17 padded to 64 ---------------------------------------------------
dumps "$work/unpadded" --cp 1
judge 0 "$work"/unpadded/rank_*.h5
base_excluded=$(excluded "$work/judged.h5" 1)
# (at cp 1 every layout is contiguous)
for spec in "1 contiguous" "2 contiguous" "2 zigzag" "4 contiguous" "4 zigzag" \
    "4 round-robin"; do
    read -r cp layout <<< "$spec"
    dumps "$work/padded" --cp "$cp" --layout "$layout" --padded-length 64
    judge 0 "$work"/padded/rank_*.h5
    grep -q "# layout: $layout (cp $cp, 64 positions for S = 17)" "$work/judge.out" ||
        fail "padded to 64, $spec: $(grep '# layout' "$work/judge.out")"
    # the 47 padding positions of every batch row are excluded from the error, nothing else
    [ "$(excluded "$work/judged.h5" "$cp")" = $((base_excluded + batch * 47 * vocab)) ] ||
        fail "padded to 64, $spec: $(excluded "$work/judged.h5" "$cp") logits excluded, expected $base_excluded + $batch·47·$vocab"
done
for spec in "2 zigzag" "4 contiguous"; do # a NaN at padding fails, named by position
    read -r cp layout <<< "$spec"
    dumps "$work/padded" --cp "$cp" --layout "$layout" --padded-length 64 --wrong padding-nan
    judge 1 "$work"/padded/rank_*.h5
    grep -q "FAIL logits rank [0-9] batch row 0 position 63 vocab 0: 1 non-finite value" \
        "$work/judge.out" || fail "a NaN at padding position 63 ($spec) is not named"
done
# the bound: the judge holds 8·B + 64 bytes per padded position (judge_dumps.h: the logits are
# compared one block at a time), 12·B·V more under --store all, so 4 KiB takes 4096 / 80 = 51
# positions here (B = 2, V = 64): 64 is past it
[ "$batch" = 2 ] && [ "$vocab" = 64 ] || fail "autopad-length-17 is B $batch V $vocab, not 2 and 64"
dumps "$work/padded" --cp 4 --layout zigzag --padded-length 64
judge 2 "$work"/padded/rank_*.h5 --max-memory 4K
grep -q "padding past the bound: .*the padded length Sp would pass 51 positions.*4.0 KiB" \
    "$work/judge.out" || fail "a padded length past the bound is not refused as padding"
[ ! -e "$work/judged.h5" ] || fail "a refused judge wrote its results file"
judge 0 "$work"/padded/rank_*.h5 --max-memory 6K # 76 positions: 64 fit
# --store all keeps every logits element: 102400 / (12·2·64 + 80) = 63 positions in 100 KiB
judge 2 "$work"/padded/rank_*.h5 --max-memory 100K --store all
grep -q "padding past the bound: .*would pass 63 positions, .*1616 bytes per padded position" \
    "$work/judge.out" || fail "--store all's values are not counted in the padding bound"
judge 0 "$work"/padded/rank_*.h5 --max-memory 110K --store all # 69 positions: 64 fit

# --- 4. --baseline with a dump that is not cp 1 -------------------------------------------------
dumps "$work/run" --cp 2 --layout zigzag
dumps "$work/cp2" --cp 2
judge 2 "$work"/run/rank_*.h5 --baseline "$work/cp2/rank_0.h5"
grep -qF -- "--baseline $work/cp2/rank_0.h5: /: a dump of cp 2 (rank 0), dtype f32; --baseline takes the framework's own cp = 1 run" \
    "$work/judge.out" || fail "a cp 2 baseline: $(cat "$work/judge.out")"
judge 2 "$work"/run/rank_*.h5 --baseline "$work/cp2/rank_0.h5" --baseline "$work/cp2/rank_1.h5"
grep -qF -- "--baseline" "$work/judge.out" && grep -qF "cp = 1" "$work/judge.out" ||
    fail "a whole cp 2 run as baseline: $(cat "$work/judge.out")"
dumps "$work/cp1bf16" --cp 1 --dtype bf16
judge 2 "$work"/run/rank_*.h5 --baseline "$work/cp1bf16/rank_0.h5"
grep -qF -- "--baseline $work/cp1bf16/rank_0.h5: /: a dump of cp 1 (rank 0), dtype bf16" \
    "$work/judge.out" || fail "a bf16 baseline for f32 dumps: $(cat "$work/judge.out")"

# a cp no run can have (a file says anything): refused as a missing rank, nothing of its size made
dumps "$work/hugecp" --cp 1
"$python" -c 'import sys, h5py, numpy as np; h5py.File(sys.argv[1], "r+").attrs["cp"] = np.int64(2**63 - 1)' \
    "$work/hugecp/rank_0.h5" || fail "rewriting cp"
judge 2 "$work"/hugecp/rank_*.h5
grep -q "no dump of rank 1: 1 dump given for cp 9223372036854775807" "$work/judge.out" ||
    fail "cp = INT64_MAX: $(cat "$work/judge.out")"

# --- 5. a dump of another export (other shapes: no lm_head) is named as such --------------------
mv "$work/export.h5" "$work/export-autopad.h5"
"$cpparity" export "$source_dir/cases/ci.yaml" --case tied-embeddings -o "$work/export.h5" \
    > "$work/export.out" 2>&1 || fail "export of tied-embeddings"
dumps "$work/other" --cp 2
mv "$work/export.h5" "$work/export-tied.h5"
mv "$work/export-autopad.h5" "$work/export.h5"
judge 2 "$work"/other/rank_*.h5
grep -qF "rank_0.h5: /: a dump of another export or seed: its export_digest" "$work/judge.out" &&
    grep -qF "(case tied-embeddings" "$work/judge.out" &&
    grep -qF "(case autopad-length-17" "$work/judge.out" ||
    fail "a dump of another export: $(cat "$work/judge.out")"
! grep -q "shape" "$work/judge.out" || fail "a dump of another export is refused for its shapes"

# --- --reference-cache: a folder made when missing, as `run` makes it; reused the second time ----
judge 0 "$work"/run/rank_*.h5 --reference-cache "$work/cache"
grep -q "# reference cache $work/cache: computed and stored" "$work/judge.out" ||
    fail "a judge's --reference-cache folder: $(grep 'reference cache' "$work/judge.out")"
judge 0 "$work"/run/rank_*.h5 --reference-cache "$work/cache"
grep -q "# reference cache $work/cache: reused" "$work/judge.out" ||
    fail "a judge's --reference-cache is not reused: $(grep 'reference cache' "$work/judge.out")"

# --- 6. an empty framework_version ---------------------------------------------------------------
dumps "$work/noversion" --cp 2 --framework-version ""
judge 0 "$work"/noversion/rank_*.h5
grep -q "framework cpparity-make-dumps, kernel float64 reference" "$work/judge.out" ||
    fail "an empty framework_version: $(grep '# layout' "$work/judge.out")"
grep -q "implementation cpparity-make-dumps, kernel" "$work/judge.out" ||
    fail "an empty framework_version in the preamble: $(grep '# ranks' "$work/judge.out")"
echo "judge usability: $checks checks passed"
