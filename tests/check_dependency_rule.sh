#!/usr/bin/env bash
# check_dependency_rule.sh — the one-way dependency rule of docs/architecture.md, checked.
#
#   tests/check_dependency_rule.sh SOURCE_DIR
#
# Runs, from SOURCE_DIR, every `grep` line of the ```sh block in the section "Folders and the
# direction of dependencies" of docs/architecture.md: the doc's lines are the test, so the two
# cannot disagree. Each line must print nothing (on stdout or stderr: a folder that no longer
# exists is a failure too). The block must hold at least one line and a line checking
# results_model/, the results model below the harness and the reports.
# Exit 0 when every line printed nothing; else 1, after printing each offending line and what it
# found.
set -u
source_dir=${1:?usage: tests/check_dependency_rule.sh SOURCE_DIR}
doc=$source_dir/docs/architecture.md
cd "$source_dir" || exit 1

# The first ```sh block after the section's heading, up to the next heading.
checks=$(awk '
    /^## / { in_section = ($0 ~ /^## Folders and the direction of dependencies/) }
    in_section && !done && /^```sh$/ { in_block = 1; next }
    in_block && /^```$/ { in_block = 0; done = 1 }
    in_block && /^grep / { print }
' "$doc")

if [ -z "$checks" ]; then
    echo "FAILED: no grep line in the sh block of $doc's dependency section" >&2
    exit 1
fi
if ! grep -q 'results_model' <<<"$checks"; then
    echo "FAILED: no line of $doc's dependency checks covers results_model/" >&2
    exit 1
fi

failed=0
count=0
while IFS= read -r line; do
    count=$((count + 1))
    found=$(bash -c "$line" 2>&1)
    if [ -n "$found" ]; then
        failed=1
        printf 'FAILED: %s\n  printed:\n%s\n' "$line" "$(sed 's/^/    /' <<<"$found")" >&2
    fi
done <<<"$checks"

if [ "$failed" -ne 0 ]; then
    echo "the dependency rule of docs/architecture.md is broken (lines above)" >&2
    exit 1
fi
echo "$count dependency checks of docs/architecture.md print nothing"
