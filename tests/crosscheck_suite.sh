#!/usr/bin/env bash
# Crosscheck every case of a suite against the independent PyTorch recomputation.
#
# Usage: crosscheck_suite.sh CPPARITY_BINARY SUITE.yaml WORKDIR
#
# For each case name printed by `CPPARITY_BINARY list --names SUITE.yaml`, exports the case to
# WORKDIR/<name>.h5, then runs fixtures/crosscheck_torch.py once on all of them (Debian's
# /usr/bin/python3 with python3-torch, python3-h5py, python3-numpy). Prints the worst relative L2 error over all cases
# and "N passed, M failed"; exits 1 if any case failed or if the suite lists no case.
set -euo pipefail

if [ "$#" -ne 3 ]; then
    echo "usage: $0 CPPARITY_BINARY SUITE.yaml WORKDIR" >&2
    exit 2
fi

binary=$1
suite=$2
workdir=$3
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
crosscheck="$script_dir/../fixtures/crosscheck_torch.py"
python=/usr/bin/python3

mkdir -p "$workdir"

if ! names=$("$binary" list --names "$suite"); then
    echo "crosscheck_suite: '$binary list --names $suite' failed" >&2
    exit 1
fi
mapfile -t cases < <(printf '%s\n' "$names" | sed -e 's/[[:space:]]*$//' -e '/^$/d')
if [ "${#cases[@]}" -eq 0 ]; then
    echo "crosscheck_suite: $suite lists no case; a crosscheck that checked nothing fails" >&2
    exit 1
fi

passed=0
failed=0
failed_names=()
summaries="$workdir/crosscheck_summaries.txt"
: >"$summaries"

# Every case exported, then one interpreter checks them all: importing torch takes seconds, and
# once per case it was most of this test's time.
files=()
exported=()
for name in "${cases[@]}"; do
    file="$workdir/$name.h5"
    rm -f "$file"
    if ! "$binary" export "$suite" --case "$name" -o "$file"; then
        echo "crosscheck_suite: export of case '$name' failed" >&2
        failed=$((failed + 1))
        failed_names+=("$name (export)")
        continue
    fi
    files+=("$file")
    exported+=("$name")
done
status=0
output=""
if [ "${#files[@]}" -gt 0 ]; then
    output=$("$python" "$crosscheck" --quiet "${files[@]}" 2>&1) || status=$?
fi
printf '%s\n' "$output"
printf '%s\n' "$output" | grep '^crosscheck .* worst relative L2 ' >>"$summaries" || true
# a case passed when its own summary line says PASS; a case without one (the checker stopped
# before it) failed, as does every case when the checker exits non-zero without naming a failure
for name in "${exported[@]}"; do
    if grep -q "^crosscheck $workdir/$name.h5 case $name: .*, PASS$" "$summaries"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failed_names+=("$name")
    fi
done
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=$((failed + 1))
    failed_names+=("the checker itself (exit $status)")
fi

# Worst relative L2 over every summary line (nan/inf count as the worst).
"$python" - "$summaries" <<'EOF'
import math
import re
import sys

worst, where = None, None
with open(sys.argv[1]) as f:
    for line in f:
        match = re.search(r"^crosscheck (\S+) case (\S+): .*worst relative L2 (\S+) \((\S+)\)",
                          line)
        if not match:
            continue
        value = float(match.group(3))
        ranked = value if math.isfinite(value) else math.inf
        if worst is None or ranked > worst[0]:
            worst, where = (ranked, value), "case %s, %s" % (match.group(2), match.group(4))
if worst is None:
    print("worst relative L2 over all cases: none (no case was compared)")
else:
    print("worst relative L2 over all cases: %.3e (%s)" % (worst[1], where))
EOF

if [ "$failed" -gt 0 ]; then
    printf 'failed: %s\n' "${failed_names[@]}"
fi
echo "$passed passed, $failed failed"
if [ "$failed" -gt 0 ]; then
    exit 1
fi
exit 0
