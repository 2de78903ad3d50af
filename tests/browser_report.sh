#!/usr/bin/env bash
# browser_report.sh CPPARITY SOURCE_DIR WORK_DIR — `cpparity report` pages rendered by a real
# browser (headless Chromium): a passing run, a run with a planted fault reported against
# the passing one (--baseline: trend and changes), and `cpparity judge` of zigzag dumps with a
# noisy rank (its ranks drawn at the global positions they hold). For each page:
#   * --dump-dom after its scripts ran: <html data-report="rendered">, as many plots drawn as
#     the page expects (data-charts-drawn = data-charts-expected > 0), every <canvas> marked
#     data-drawn="yes" (its script found painted pixels and data points on it), #render-errors
#     empty, and no line from the browser's console (the page logs nothing when all is well);
#   * a 1400 x 3000 screenshot that is not blank: many colours, ink, and the first plot colour
#     and the FAIL chip colour on screen (tests/check_report_screenshot.py);
# and the tables of tensors the script draws from the page's data: every open one (failed items)
# drawn, with the limit and rule that decided each tensor, and a folded one opened by a link.
# The report of a whole suite, its size and drawing time: tests/browser_report_suite.sh.
# The pages and screenshots stay in WORK_DIR for people to look at. Exit 77 (skipped) when no
# Chromium is installed (`make test` installs Debian's chromium).
set -uo pipefail
cpparity=${1:?usage: browser_report.sh CPPARITY SOURCE_DIR WORK_DIR}
source_dir=${2:?}
work=${3:?}
python=${CPPARITY_SYSTEM_PYTHON:-/usr/bin/python3}

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "SKIPPED: no chromium on PATH (apt-get install chromium; make test installs it)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work" || exit 1
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# Cases with padding, packed documents, automatic padding and a refusal; the fault makes the
# sliding ones fail.
cases=(--case 'padding-positions-continue-left-and-right' --case 'packed-documents-spanning-*'
       --case 'autopad-length-17' --case 'refuse-heads-not-divisible-by-cp')
"$cpparity" run "$source_dir/cases/ci.yaml" --comm local "${cases[@]}" --out "$work/pass.h5" \
  >"$work/pass-run.txt" 2>&1 || { cat "$work/pass-run.txt"; fail "the clean run did not pass"; }
"$cpparity" run "$source_dir/cases/ci.yaml" --comm local "${cases[@]}" \
  --inject window-off-by-one --out "$work/fail.h5" >"$work/fail-run.txt" 2>&1
[ $? = 1 ] || fail "the run with a planted fault did not exit 1"
"$cpparity" report "$work/pass.h5" -o "$work/pass.html" || fail "report of the clean run"
"$cpparity" report "$work/fail.h5" --baseline "$work/pass.h5" -o "$work/fail.html" ||
  fail "report of the failing run"
# A framework's run judged: zigzag dumps at cp 2 (tests/judge/make_dumps.py) with noise on rank
# 0's logits, so the sequence plot draws each rank at the global positions it holds.
"$cpparity" export "$source_dir/cases/ci.yaml" --case packed-documents-spanning-ranks-with-length-1 \
  -o "$work/export.h5" >"$work/judged-run.txt" 2>&1 &&
  "$python" "$source_dir/tests/judge/make_dumps.py" "$work/export.h5" "$work/dumps" --cp 2 \
    --layout zigzag --wrong logits-noise >>"$work/judged-run.txt" 2>&1 ||
  fail "export and zigzag dumps: $(tail -3 "$work/judged-run.txt")"
"$cpparity" judge "$work/export.h5" "$work/dumps"/rank_*.h5 --out "$work/judged.h5" \
  >>"$work/judged-run.txt" 2>&1
[ $? = 1 ] || fail "the judge of noisy zigzag dumps did not exit 1"
"$cpparity" report "$work/judged.h5" -o "$work/judged.html" || fail "report of the judged run"

# Chromium as root needs --no-sandbox, and a container's small /dev/shm --disable-dev-shm-usage;
# its profile stays in WORK_DIR.
chromium_run() {
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --hide-scrollbars --user-data-dir="$work/profile" --virtual-time-budget=10000 "$@"
}

for page in pass fail judged; do
  html="$work/$page.html"
  [ -f "$html" ] || continue
  chromium_run --enable-logging=stderr --v=0 --dump-dom "file://$html" \
    >"$work/$page.dom.html" 2>"$work/$page.console.txt" || fail "$page: chromium --dump-dom"
  dom="$work/$page.dom.html"
  grep -q '<html[^>]* data-report="rendered"' "$dom" ||
    fail "$page: the page did not mark itself rendered: $(grep -o 'data-report="[a-z]*"' "$dom" | head -1); errors: $(grep -o '<ul id="render-errors">.*</ul>' "$dom" | head -c 600)"
  expected=$(grep -o 'data-charts-expected="[0-9]*"' "$dom" | grep -o '[0-9]*')
  drawn=$(grep -o 'data-charts-drawn="[0-9]*"' "$dom" | grep -o '[0-9]*')
  canvases=$(grep -o '<canvas ' "$dom" | wc -l)
  painted=$(grep -o '<canvas [^>]*data-drawn="yes"' "$dom" | wc -l)
  echo "$page: plots expected ${expected:-?}, drawn ${drawn:-?}; canvases $canvases, painted $painted"
  [ -n "$expected" ] && [ "$expected" -gt 0 ] && [ "$drawn" = "$expected" ] ||
    fail "$page: plots drawn ${drawn:-none} of ${expected:-none}"
  [ "$canvases" -gt 0 ] && [ "$painted" = "$canvases" ] ||
    fail "$page: $painted of $canvases canvases painted"
  grep -q '<ul id="render-errors"></ul>' "$dom" || fail "$page: #render-errors is not empty"
  if grep -q 'CONSOLE' "$work/$page.console.txt"; then
    fail "$page: console output: $(grep 'CONSOLE' "$work/$page.console.txt" | head -5)"
  fi
  chromium_run --window-size=1400,3000 --screenshot="$work/$page.png" "file://$html" \
    >/dev/null 2>&1 || fail "$page: chromium --screenshot"
  # #4e79a7: the first series of every plot; #ff8182: the FAIL chip (the grid and its legend).
  "$python" "$source_dir/tests/check_report_screenshot.py" "$work/$page.png" \
    --colour 4e79a7 --colour ff8182 || fail "$page: the screenshot does not show a rendered page"
done

# The failing page has the plots a failure needs: the trend over both runs, the logits error
# along the sequence, and the changes since the baseline with the new failures marked.
dom="$work/fail.dom.html"
grep -q '"kind":"trend"' "$work/fail.html" || fail "fail: no trend plot"
grep -q '"kind":"profile"' "$work/fail.html" || fail "fail: no sequence plot"
grep -q '<h2>Changes since ' "$dom" || fail "fail: no changes section"
grep -q '<sup>new</sup>' "$dom" || fail "fail: no new failure marked in the grid"
grep -q 'FAULT INJECTED' "$dom" || fail "fail: the planted fault is not announced"
# The tensors are data (reports/html_report_tensors.c) the page's script draws into each item's
# <details> when it is open: every failed item's, open from the start, is drawn, with its failing
# rows, each tensor's limit with the rule that decided it, and every reason spelled out.
grep -q '<table class="tensors"' "$work/fail.html" && fail "fail: tensor rows written as HTML"
open_tables=$(grep -o '<details class="tensors"[^>]* open=""[^>]*>' "$dom" | wc -l)
drawn_tables=$(grep -o '<details class="tensors"[^>]* open=""[^>]* data-drawn="yes"><summary>[^<]*</summary><table class="tensors">' "$dom" | wc -l)
echo "fail: $drawn_tables of $open_tables open tables of tensors drawn"
[ "$open_tables" -gt 0 ] && [ "$drawn_tables" = "$open_tables" ] ||
  fail "fail: $drawn_tables of $open_tables open tables of tensors drawn"
grep -q '<td><b>FAIL</b></td><td class="message">error [0-9.e+-]* &gt; limit ' "$dom" ||
  fail "fail: no failing tensor row with its reason"
grep -q '<td>[0-9.e+-]* (\(naive\|cp 1\))</td>' "$dom" ||
  fail "fail: no tensor's limit named with the rule that decided it"
grep -q '<td class="message">[^<]*{[elcb]}' "$dom" && fail "fail: a reason with a placeholder left in it"
# A folded item opens, and its table is drawn, from a link to it (#tensors-N, #item-N).
closed=$(grep -o '<details class="tensors" id="tensors-[0-9]*" data-item="[0-9]*">' "$work/pass.html" |
         head -1 | grep -o 'tensors-[0-9]*')
chromium_run --dump-dom "file://$work/pass.html#$closed" >"$work/pass-opened.dom.html" 2>/dev/null ||
  fail "pass: chromium --dump-dom #$closed"
grep -q "id=\"$closed\"[^>]* open=\"\"[^>]* data-drawn=\"yes\"><summary>[^<]*</summary><table class=\"tensors\">" \
  "$work/pass-opened.dom.html" || fail "pass: #$closed did not open its table of tensors"
# The judged page draws the zigzag ranks at their global positions: rank 0's two chunks are two
# runs of the same rank, and the plot says which layout it is.
grep -q '"layout":"zigzag","ranks":\[{"rank":0,"offset":0,' "$work/judged.html" ||
  fail "judged: the profile does not start with rank 0's first chunk at position 0"
[ "$(grep -o '{"rank":0,"offset":[0-9]*' "$work/judged.html" | sort -u | wc -l)" -ge 2 ] ||
  fail "judged: rank 0's second zigzag chunk is not drawn at its own position"
grep -q 'f32 cp 2 zigzag (FAIL)' "$work/judged.html" || fail "judged: the item label names no layout"
exit $failed
