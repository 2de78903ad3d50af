#!/usr/bin/env python3
"""check_suite_coverage.py CPPARITY SUITE.yaml — no mask family of the suite rests on one case.

Reads the suite through cpparity's own loader (`cpparity list`: each case's layer types, chunk
origin, padding sides, packed documents and cp sizes, defaults and sweeps applied) and requires
every combination of a mask feature (causal, window, chunks from the row, chunks from each
document, packed documents) x a padding side (left, right, none) x a cp size > 1 of the suite to
appear in at least two model-level cases that are not expected refusals, so that no slip in one
family is caught by a single case or by luck. Likewise every layout and algorithm a case of the
suite lists (zigzag, round-robin, ring, hybrid) must be listed by at least two such cases, under
each mask feature. Exits 1 listing each combination held by fewer.
"""
import re
import subprocess
import sys

FEATURES = ["causal", "window", "chunks-row", "chunks-document", "documents"]
SIDES = ["left", "right", "none"]
NEEDED = 2


def case_features(line):
    """(name, features, sides, cp sizes) of one `cpparity list` line."""
    name = line.split()[0]
    features = {"causal"}
    if re.search(r"\bsliding x", line):
        features.add("window")
    for match in re.finditer(r"\bchunked x\d+ \(C=\d+(,document)?\)", line):
        features.add("chunks-document" if match.group(1) else "chunks-row")
    if re.search(r"\bpacked\b", line):
        features.add("documents")
    sides = {side for side in ("left", "right") if re.search(rf"\b{side}-pad\b", line)} or {"none"}
    # "cp=1,2,4", then " layouts=... algorithms=..." when a case has more than contiguous Ulysses
    cps = [int(cp) for cp in re.search(r"\bcp=([0-9,]+)(\s|$)", line).group(1).split(",")]
    return name, features, sides, cps


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    listing = subprocess.run([sys.argv[1], "list", sys.argv[2]], capture_output=True, text=True,
                             check=True).stdout
    holders = {}
    cp_sizes = set()
    for line in listing.splitlines():
        if not line.strip() or "expect-refuse" in line:
            continue
        name, features, sides, cps = case_features(line)
        for cp in cps:
            if cp > 1:
                cp_sizes.add(cp)
                for feature in features:
                    for side in sides:
                        holders.setdefault((feature, side, cp), []).append(name)
    short = []
    # each layout and algorithm beyond contiguous Ulysses, under each mask feature
    variants = {}
    for line in listing.splitlines():
        if not line.strip() or "expect-refuse" in line:
            continue
        name, features, _, _ = case_features(line)
        for key in ("layouts", "algorithms"):
            match = re.search(rf"\b{key}=(\S+)", line)
            for value in (match.group(1).split(",") if match else []):
                value = value.split(":")[0]  # hybrid:2x2 -> hybrid
                if value not in ("contiguous", "ulysses"):
                    for feature in features:
                        variants.setdefault((value, feature), set()).add(name)
    for value in sorted({value for value, _ in variants}):
        for feature in FEATURES:
            cases = sorted(variants.get((value, feature), []))
            if len(cases) < NEEDED:
                short.append(f"{value} x {feature}: {len(cases)} case"
                             f"{'' if len(cases) == 1 else 's'} ({', '.join(cases) or 'none'})")
    for feature in FEATURES:
        for side in SIDES:
            for cp in sorted(cp_sizes):
                cases = holders.get((feature, side, cp), [])
                if len(cases) < NEEDED:
                    short.append(f"{feature} x {side} padding x cp {cp}: "
                                 f"{len(cases)} case{'' if len(cases) == 1 else 's'} "
                                 f"({', '.join(cases) or 'none'})")
    combinations = len(FEATURES) * len(SIDES) * len(cp_sizes) + len(FEATURES) * len(
        {value for value, _ in variants})
    for line in short:
        print(f"single point of detection: {line}")
    print(f"# {combinations} combinations of mask feature x padding side x cp size and of "
          f"layout or algorithm x mask feature: "
          f"{combinations - len(short)} held by at least {NEEDED} cases, {len(short)} by fewer")
    sys.exit(1 if short else 0)


if __name__ == "__main__":
    main()
