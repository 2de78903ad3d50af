#!/usr/bin/python3
"""The parity matrix of the judged frameworks (docs/frameworks.md), made from results files.

    framework_matrix.py collect RESULTS_DIR --cpparity BIN [--suite SUITE.yaml ...]
                        [--notes NOTES.md] -o MATRIX.json
    framework_matrix.py render MATRIX.json -o MATRIX.md
    framework_matrix.py check MATRIX.json MATRIX.md

RESULTS_DIR holds one folder per backend (torch-cp-ring, deepspeed-ulysses-0.19.8, ...), as the
`external` tests leave them when $CPPARITY_MATRIX_RESULTS is set (tests/judge/example_steps.sh:
keep_result, not_supported): `cpparity judge` results files (*.h5), and
*.not-supported.json records of cases a backend does not claim (not run).

collect reads every run of every results file but the cp 1 baselines of `judge --baseline`
(those runs have files of their own) (framework and version from its provenance; case,
cp, dtype, token layout, verdict; the worst tensor by error / deciding limit, the limit
results_deciding_limit in results_model/results.c applies: the cp 1 limit where it is tighter)
and each case's mask features from `cpparity list SUITE` (what the C code says the case
exercises, so that a case not run is described like one that ran). NOTES.md gives each
backend's explanation ("## BACKEND" sections), copied into the matrix so that each FAIL in it
is explained next to it. render writes the Markdown; check exits 1 when MATRIX.md is not
exactly the rendering of MATRIX.json (docs/frameworks.md is never edited by hand).
`make frameworks-matrix` runs the external tests and both steps.

Needs numpy and h5py (Debian's python3-h5py).
"""

import argparse
import glob
import json
import math
import os
import re
import subprocess
import sys

# the matrix's columns: (key, heading); a case has a feature when features() says so
FEATURES = (
    ("causal", "causal only"),
    ("right_padding", "right padding"),
    ("left_padding", "left padding"),
    ("packed", "packed documents"),
    ("sliding", "sliding window"),
    ("chunked_row", "chunked, row origin"),
    ("chunked_document", "chunked, document origin"),
    ("chunked_position", "chunked, position origin"),
    ("gqa", "GQA / MQA"),
    ("autopad", "automatic padding"),
)
MATRIX_FORMAT = "cpparity-framework-matrix"
MATRIX_FORMAT_VERSION = 1


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def suite_features(cpparity, suites):
    """{case: {feature: bool, "seq_len": S}} from `cpparity list`'s description of each case."""
    listing = subprocess.run([cpparity, "list", *suites], check=True, capture_output=True,
                             text=True).stdout
    cases = {}
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        name, what = fields[0], line
        length = re.search(r"\bS=(\d+)", what)
        layer_types = re.findall(r"\b(full|sliding|chunked) x\d+(?: \(([^)]*)\))?", what)
        chunk_origins = {(detail.split(",") + ["row"])[1] if "," in detail else "row"
                         for kind, detail in layer_types if kind == "chunked"}
        tokens = set(what.split())
        left, right, packed = "left-pad" in tokens, "right-pad" in tokens, "packed" in tokens
        sliding = any(kind == "sliding" for kind, _ in layer_types)
        cases[name] = {
            "seq_len": int(length.group(1)) if length else 0,
            "causal": not (left or right or packed or sliding or chunk_origins),
            "right_padding": right, "left_padding": left, "packed": packed, "sliding": sliding,
            "chunked_row": "row" in chunk_origins,
            "chunked_document": "document" in chunk_origins,
            "chunked_position": "position" in chunk_origins,
            "gqa": "GQA" in tokens or "MQA" in tokens,
        }
    return cases


def worst_tensor(metrics):
    """(ratio, tensor, rank, error, limit) of the compared tensor furthest past its limit."""
    worst = None
    for row in metrics:
        limit, cp1_limit = float(row["limit"]), float(row["cp1_limit"])
        if 0.0 < cp1_limit < limit:
            limit = cp1_limit
        error = float(row["relative_l2"])
        if int(row["nonfinite"]) > 0 or math.isnan(error):
            ratio = math.inf
        elif limit > 0.0:
            ratio = error / limit
        else:
            ratio = math.inf if error > 0.0 else 0.0
        if worst is None or ratio > worst[0]:
            worst = (ratio, text(row["tensor"]), int(row["rank"]), error, limit)
    return worst


def read_results_file(path, backend):
    """One entry per run of a judge's results file."""
    import h5py
    entries = []
    with h5py.File(path, "r") as results:
        provenance = results["provenance"].attrs
        implementation = text(provenance["implementation"]).split(" ", 1)
        framework = implementation[0]
        version = implementation[1] if len(implementation) > 1 else ""
        kernel = text(provenance["kernel"])
        ranks = int(provenance["ranks"])  # the judged dumps' cp
        for case_name, case in results["cases"].items():
            for dtype_group in case.values():
                if not hasattr(dtype_group, "items"):
                    continue
                for run in dtype_group.values():
                    if not hasattr(run, "attrs") or "outcome" not in run.attrs:
                        continue
                    if int(run.attrs["cp"]) != ranks:
                        continue  # judge --baseline's cp 1 dump: its own file has its entry
                    attributes = run.attrs
                    entry = {
                        "backend": backend, "framework": framework, "version": version,
                        "kernel": kernel, "case": case_name, "cp": int(attributes["cp"]),
                        "dtype": text(attributes["dtype"]),
                        "layout": text(attributes["token_layout"]),
                        "outcome": text(attributes["outcome"]),
                        "padded_seq_len": int(attributes["padded_seq_len"]),
                        "seq_len": int(case.attrs["seq_len"]),
                        "file": os.path.basename(path),
                    }
                    if "metrics" in run:
                        ratio, tensor, rank, error, limit = worst_tensor(run["metrics"][()])
                        entry.update(ratio=ratio, tensor=tensor, rank=rank, error=error,
                                     limit=limit)
                    else:
                        entry["message"] = text(attributes["message"])
                    entries.append(entry)
    return entries


def read_notes(path):
    """{backend: markdown} from the "## BACKEND" sections of NOTES.md."""
    notes, backend = {}, None
    if not path:
        return notes
    with open(path) as source:
        for line in source:
            heading = re.match(r"^## (\S+)\s*$", line)
            if heading:
                backend = heading.group(1)
                notes[backend] = ""
            elif backend:
                notes[backend] += line
    return {backend: note.strip() for backend, note in notes.items()}


def collect(arguments):
    cases = suite_features(arguments.cpparity, arguments.suite)
    entries = []
    backends = sorted(entry for entry in os.listdir(arguments.results)
                      if os.path.isdir(os.path.join(arguments.results, entry)))
    if not backends:
        sys.exit(f"{arguments.results}: no backend folder (run the external tests with "
                 f"CPPARITY_MATRIX_RESULTS={arguments.results})")
    for backend in backends:
        folder = os.path.join(arguments.results, backend)
        for path in sorted(glob.glob(os.path.join(folder, "*.h5"))):
            entries.extend(read_results_file(path, backend))
        for path in sorted(glob.glob(os.path.join(folder, "*.not-supported.json"))):
            with open(path) as source:
                record = json.load(source)
            entries.append({
                "backend": backend, "framework": record["framework"],
                "version": record["framework_version"], "kernel": "", "case": record["case"],
                "cp": record["cp"], "dtype": record["dtype"], "layout": "",
                "outcome": "not supported", "reason": record["reason"],
                "file": os.path.basename(path)})
    for entry in entries:
        features = cases.get(entry["case"])
        if features is None:
            sys.exit(f"{entry['backend']}/{entry['file']}: case {entry['case']} is in no suite "
                     f"given ({', '.join(arguments.suite)})")
        entry["features"] = [key for key, _ in FEATURES if features.get(key)]
        padded = entry.get("padded_seq_len", 0)
        if padded > features["seq_len"] or (padded == 0 and features["seq_len"] % entry["cp"]):
            entry["features"].append("autopad")
    for entry in entries:  # JSON has no infinity: a non-finite tensor's ratio is written "inf"
        if math.isinf(entry.get("ratio", 0.0)):
            entry["ratio"] = "inf"
    matrix = {"format": MATRIX_FORMAT, "format_version": MATRIX_FORMAT_VERSION,
              "notes": read_notes(arguments.notes),
              "entries": sorted(entries, key=lambda e: (e["backend"], e["case"], e["dtype"],
                                                       e["cp"], e["layout"], e["file"]))}
    with open(arguments.out, "w") as out:
        json.dump(matrix, out, indent=1, sort_keys=True)
        out.write("\n")
    print(f"{arguments.out}: {len(entries)} entries from {len(backends)} backends")
    return 0


def ratio_of(entry):
    ratio = entry.get("ratio", 0.0)
    return math.inf if ratio == "inf" else float(ratio)


def cell(entries):
    """The verdict of a set of entries (one row, one feature) as a table cell."""
    if not entries:
        return "not tried"
    ran = [entry for entry in entries if entry["outcome"] != "not supported"]
    unsupported = len(entries) - len(ran)
    failed = [entry for entry in ran if entry["outcome"] != "PASS"]
    suffix = f"; {unsupported} not supported" if unsupported and ran else ""
    if failed:
        worst = max(failed, key=ratio_of)
        if "tensor" in worst:
            what = (f"{ratio_of(worst):.3g}× limit, {worst['tensor']} rank {worst['rank']}, "
                    f"{worst['case']} cp {worst['cp']}")
        else:
            what = f"{worst['outcome']}: {worst.get('message', '')}"
        return f"**FAIL** {len(failed)}/{len(ran)} ({what}){suffix}"
    if ran:
        worst = max(ran, key=ratio_of)
        return f"PASS {len(ran)} ({ratio_of(worst):.2f} of limit){suffix}"
    return "not supported"


def render(matrix):
    entries = matrix["entries"]
    # a row per backend, layout and dtype; a case not supported belongs to each row of its
    # backend and dtype (it was refused whatever the layout), or to a row of its own
    rows = {}
    for entry in entries:
        if entry["outcome"] != "not supported":
            rows.setdefault((entry["backend"], entry["framework"], entry["version"],
                             entry["layout"], entry["dtype"]), []).append(entry)
    for entry in entries:
        if entry["outcome"] == "not supported":
            keys = [key for key in rows if key[0] == entry["backend"] and key[4] == entry["dtype"]]
            for key in keys or [(entry["backend"], entry["framework"], entry["version"], "–",
                                 entry["dtype"])]:
                rows.setdefault(key, []).append(entry)
    lines = [
        "# Parity matrix of the judged frameworks",
        "",
        "Generated by `scripts/framework_matrix.py` from the results files of the `external`",
        "tests; do not edit by hand. Refresh it with `make frameworks-matrix`. Every cell is",
        "`cpparity judge`'s verdict against the float64 reference (docs/tolerances.md) over",
        "every judged run of a case with that mask feature: PASS n (the worst error as a",
        "fraction of its limit), **FAIL** k/n (the worst failing tensor, by how many times",
        "its limit, its rank, case and cp), not supported (the framework does not claim",
        "such a case: not run, with the reason below), not tried (no case with that",
        "feature was given to it). Cases are `cases/ci.yaml`'s; their features as",
        "`cpparity list` gives them.",
        "",
        "| framework | version | backend | layout | dtype | cp | "
        + " | ".join(heading for _, heading in FEATURES) + " |",
        "|---|---|---|---|---|---|" + "---|" * len(FEATURES),
    ]
    for (backend, framework, version, layout, dtype), group in sorted(rows.items()):
        cps = sorted({entry["cp"] for entry in group if entry["outcome"] != "not supported"})
        cells = [cell([entry for entry in group if key in entry["features"]])
                 for key, _ in FEATURES]
        lines.append(f"| {framework} | {version} | {backend} | {layout} | {dtype} | "
                     f"{', '.join(map(str, cps)) or '–'} | " + " | ".join(cells) + " |")
    lines.append("")
    for backend in sorted({entry["backend"] for entry in entries}):
        group = [entry for entry in entries if entry["backend"] == backend]
        lines += [f"## {backend}", ""]
        if backend in matrix["notes"]:
            lines += [matrix["notes"][backend], ""]
        judged = [entry for entry in group if entry["outcome"] != "not supported"]
        if judged:
            lines += ["| case | dtype | cp | layout | kernel | verdict | worst tensor (rank) | "
                      "error | limit |",
                      "|---|---|---|---|---|---|---|---|---|"]
        for entry in judged:
            verdict = entry["outcome"] if entry["outcome"] == "PASS" else f"**{entry['outcome']}**"
            first = (f"| {entry['case']} | {entry['dtype']} | {entry['cp']} | {entry['layout']} "
                     f"| {entry['kernel']} |")
            if "tensor" in entry:
                lines.append(f"{first} {verdict} | {entry['tensor']} ({entry['rank']}) | "
                             f"{entry['error']:.3g} | {entry['limit']:.3g} |")
            else:
                lines.append(f"{first} {verdict}: {entry.get('message', '')} | | | |")
        lines += [""] + not_supported_table(group)
    return "\n".join(lines)


def not_supported_table(group):
    """The runs a backend does not claim, a row per reason: how many, and which cases (each with
    its dtypes and cp sizes), instead of the same reason once per case and dtype."""
    reasons = {}
    for entry in group:
        if entry["outcome"] == "not supported":
            reasons.setdefault(entry["reason"], []).append(entry)
    if not reasons:
        return []
    lines = ["Not supported (not run), by reason:", "",
             "| reason | runs | cases (dtypes, cp) |", "|---|---|---|"]
    for reason, entries in sorted(reasons.items(), key=lambda item: (-len(item[1]), item[0])):
        cases = {}
        for entry in entries:
            dtypes, cps = cases.setdefault(entry["case"], (set(), set()))
            dtypes.add(entry["dtype"])
            cps.add(entry["cp"])
        named = ", ".join(f"{case} ({', '.join(sorted(dtypes))}; cp "
                          f"{', '.join(map(str, sorted(cps)))})"
                          for case, (dtypes, cps) in sorted(cases.items()))
        lines.append(f"| {reason} | {len(entries)} | {named} |")
    return lines + [""]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 2)[2])
    commands = parser.add_subparsers(dest="command", required=True)
    collecting = commands.add_parser("collect", help="results files -> MATRIX.json")
    collecting.add_argument("results", help="one folder per backend")
    collecting.add_argument("--cpparity", required=True, help="the cpparity binary")
    collecting.add_argument("--suite", action="append", help="case files (default ci.yaml)")
    collecting.add_argument("--notes", help="each backend's explanation (## BACKEND sections)")
    collecting.add_argument("-o", "--out", required=True)
    rendering = commands.add_parser("render", help="MATRIX.json -> MATRIX.md")
    rendering.add_argument("matrix")
    rendering.add_argument("-o", "--out", required=True)
    checking = commands.add_parser("check", help="exit 1 unless MATRIX.md renders MATRIX.json")
    checking.add_argument("matrix")
    checking.add_argument("markdown")
    arguments = parser.parse_args(argv)
    if arguments.command == "collect":
        arguments.suite = arguments.suite or [
            os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cases", "ci.yaml")]
        return collect(arguments)
    with open(arguments.matrix) as source:
        matrix = json.load(source)
    if matrix.get("format") != MATRIX_FORMAT or \
            matrix.get("format_version") != MATRIX_FORMAT_VERSION:
        sys.exit(f"{arguments.matrix}: not a {MATRIX_FORMAT} version {MATRIX_FORMAT_VERSION} file")
    markdown = render(matrix) + "\n"
    if arguments.command == "render":
        with open(arguments.out, "w") as out:
            out.write(markdown)
        return 0
    with open(arguments.markdown) as source:
        if source.read() != markdown:
            print(f"{arguments.markdown} is not the rendering of {arguments.matrix}: refresh it "
                  f"with `make frameworks-matrix` (or framework_matrix.py render), never by hand")
            return 1
    print(f"{arguments.markdown}: the rendering of {arguments.matrix}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
