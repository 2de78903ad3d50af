#!/usr/bin/env bash
# browser_report_suite.sh CPPARITY SOURCE_DIR WORK_DIR RESULTS.h5 — the `cpparity report` page of
# a whole suite at its real size (issue 33): RESULTS.h5 is cases/ci.yaml run at 4 ranks, as
# `make run` runs it (ctest: the file run/local-4-ranks leaves, fixture ci_suite_results). The
# page must
#   * weigh less than MAX_BYTES;
#   * be drawn in headless Chromium, every plot included, in less than MAX_DRAW_MS: measured by
#     tests/browser_report_measure.js, put into a copy of the page after everything else, from
#     the start of loading to the moment the page marks itself (data-report) with its layout
#     done; the best of DRAW_TRIES loads;
#   * mark itself data-report="rendered" with every plot drawn, #render-errors empty and nothing
#     on the console;
#   * in a window WINDOW_WIDTH pixels wide, keep every chip of its case x cp grid inside its cell
#     and the window, and every case's name on at most MAX_NAME_LINES lines.
# It prints the numbers it measured. The page, its DOM and Chromium's log stay in WORK_DIR. Exit
# 77 (skipped) when no Chromium is installed (`make test` installs Debian's chromium).
set -uo pipefail
cpparity=${1:?usage: browser_report_suite.sh CPPARITY SOURCE_DIR WORK_DIR RESULTS.h5}
source_dir=${2:?}
work=${3:?}
results=${4:?}
python=${CPPARITY_SYSTEM_PYTHON:-/usr/bin/python3}

# Issue 33's targets for the page of cases/ci.yaml (474 items): it was 14 MB, drawn in more than
# 2 s, so a suite of thousands of items could not be opened at all.
MAX_BYTES=4000000
MAX_DRAW_MS=2000
# Load on a shared machine only ever adds time: the best of three loads is the page's own cost.
DRAW_TRIES=3
# The width issue 33 names (a laptop's window); the grid's columns are shares of it.
WINDOW_WIDTH=1400
# The page clamps a case's name to two lines (its whole name in the tooltip); it took five.
MAX_NAME_LINES=2

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "SKIPPED: no chromium on PATH (apt-get install chromium; make test installs it)"
  exit 77
fi
if [ ! -f "$results" ]; then
  echo "FAIL: $results is missing (ctest makes it with run/local-4-ranks: cases/ci.yaml at 4 ranks)"
  exit 1
fi
rm -rf "$work" && mkdir -p "$work" || exit 1
failed=0
fail() { echo "FAIL: $*"; failed=1; }

page="$work/ci.html"
"$cpparity" report "$results" -o "$page" >"$work/report.txt" 2>&1 ||
  { cat "$work/report.txt"; echo "FAIL: cpparity report"; exit 1; }
bytes=$(stat -c %s "$page")
items=$(grep -o 'id="item-[0-9]*"' "$page" | wc -l)
echo "page: $bytes bytes (at most $MAX_BYTES), $items items"
[ "$bytes" -lt "$MAX_BYTES" ] || fail "the page weighs $bytes bytes, not less than $MAX_BYTES"

# The measuring script goes after everything else in the page's <body>.
measured="$work/ci-measured.html"
"$python" - "$page" "$source_dir/tests/browser_report_measure.js" "$measured" <<'EOF' ||
import sys
page, script, out = sys.argv[1:]
text = open(page, encoding='utf-8').read()
at = text.rindex('</body>')
open(out, 'w', encoding='utf-8').write(
    text[:at] + '<script>\n' + open(script, encoding='utf-8').read() + '</script>\n' + text[at:])
EOF
  { echo "FAIL: could not put the measuring script into the page"; exit 1; }

# Chromium as root needs --no-sandbox, and a container's small /dev/shm --disable-dev-shm-usage;
# its profile stays in WORK_DIR. The virtual time budget lets the page's deferred drawing finish.
value() { echo "$html" | grep -o "$1=\"[^\"]*\"" | head -1 | cut -d'"' -f2; } # of <html>
best=
for try in $(seq 1 $DRAW_TRIES); do
  dom="$work/ci.dom-$try.html"
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --hide-scrollbars --user-data-dir="$work/profile" --virtual-time-budget=10000 \
    --window-size=$WINDOW_WIDTH,1000 --enable-logging=stderr --v=0 --dump-dom "file://$measured" \
    >"$dom" 2>"$work/ci.console-$try.txt" || fail "chromium --dump-dom (load $try)"
  html=$(grep -o '<html[^>]*>' "$dom" | head -1)
  drawn_ms=$(value data-test-drawn-ms)
  echo "load $try: drawn in ${drawn_ms:-?} ms, laid out at $(value data-test-laid-out-ms) ms (the page's own count: every plot at" \
       "$(value data-render-ms) ms, the page without plots at $(value data-page-ms) ms);" \
       "$(value data-charts-drawn) of $(value data-charts-expected) plots"
  [ -n "$drawn_ms" ] || { fail "load $try: the page never marked itself"; continue; }
  if [ -z "$best" ] || [ "$drawn_ms" -lt "$best" ]; then best=$drawn_ms; fi
done
[ -n "$best" ] && [ "$best" -lt "$MAX_DRAW_MS" ] ||
  fail "drawn in ${best:-never} ms at best of $DRAW_TRIES loads, not under $MAX_DRAW_MS ms"

# The checks of the page itself, on the last load.
echo "grid: $(value data-test-grid-chips) chips, $(value data-test-grid-overflow) out of their" \
     "cell or the $WINDOW_WIDTH-pixel window; case names on at most $(value data-test-name-lines) lines"
echo "$html" | grep -q ' data-report="rendered"' ||
  fail "the page did not mark itself rendered: $(value data-report); errors: $(grep -o '<ul id="render-errors">.*</ul>' "$dom" | head -c 600)"
[ -n "$(value data-charts-expected)" ] && [ "$(value data-charts-drawn)" = "$(value data-charts-expected)" ] ||
  fail "plots drawn $(value data-charts-drawn) of $(value data-charts-expected)"
grep -q '<ul id="render-errors"></ul>' "$dom" || fail "#render-errors is not empty"
if grep -q 'CONSOLE' "$work/ci.console-$DRAW_TRIES.txt"; then
  fail "console output: $(grep 'CONSOLE' "$work/ci.console-$DRAW_TRIES.txt" | head -5)"
fi
[ "$(value data-test-grid-chips)" = "$items" ] ||
  fail "the grid has $(value data-test-grid-chips) chips for $items items"
[ "$(value data-test-grid-overflow)" = 0 ] ||
  fail "$(value data-test-grid-overflow) chips or cells run out of their cell or the window"
lines=$(value data-test-name-lines)
[ -n "$lines" ] && [ "$lines" -le "$MAX_NAME_LINES" ] ||
  fail "a case's name takes ${lines:-?} lines in the grid, more than $MAX_NAME_LINES"
exit $failed
