#!/usr/bin/env python3
"""check_fault_sites.py SOURCE_DIR BUILD_DIR — every fault's planting site is on the clean path.

A planted fault (common/fault.h) must perturb code that production runs: the functions named in
each fault's `where` (common/fault.c, "file function[, file function]") must have run in the clean
runs just made by a --coverage build (scripts/coverage.sh calls this after its clean runs and
before its self-test plants anything). A fault planted in a helper only the fault calls would show
here as a function never executed. Also checks that docs/bug-classes.md's table names the same
places. Exits 1 naming each fault whose site the clean runs never reached.
"""
import os
import re
import subprocess
import sys


def fault_table(source_dir):
    """[(name, [(file, function), ...])] from common/fault.c's cpparity_faults."""
    text = open(os.path.join(source_dir, "common", "fault.c"), encoding="utf-8").read()
    faults = []
    for entry in re.finditer(r"\[CPPARITY_FAULT_(\w+)\]\s*=\s*\{(.*?)\},?\n", text, re.S):
        strings, current = [], None
        # adjacent string literals are one C string; commas between them separate fields
        for token in re.finditer(r'"((?:[^"\\]|\\.)*)"|(,)', entry.group(2)):
            if token.group(2) is not None:
                if current is not None:
                    strings.append(current)
                current = None
            else:
                current = (current or "") + token.group(1)
        if current is not None:
            strings.append(current)
        if entry.group(1) in ("NONE", "COUNT"):  # COUNT: the array's own declaration
            continue
        name, where = strings[0], strings[2]
        places = []
        for place in where.split(","):
            words = place.split()
            if len(words) != 2:
                sys.exit(f"fault {name}: where '{where}' is not 'file function[, file function]'")
            places.append((words[0], words[1]))
        faults.append((name, places))
    return faults


def documented_places(source_dir):
    """{fault name: where cell without backticks} from docs/bug-classes.md's table of faults."""
    places = {}
    for line in open(os.path.join(source_dir, "docs", "bug-classes.md"), encoding="utf-8"):
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"[a-z0-9-]+", cells[0]) and "`" in cells[2]:
            places[cells[0]] = cells[2].replace("`", "")
    return places


def executed_functions(build_dir, source_dir, file_name):
    """{function: lines executed > 0} over every instrumented object compiled from file_name (a
    header: the objects of distributed/ that include it)."""
    sources = []
    for root, _, files in os.walk(os.path.join(source_dir, "distributed")):
        for name in files:
            if name == file_name or (file_name.endswith(".h") and name.endswith(".c")):
                sources.append(os.path.join(root, name))
    functions = {}
    for source in sources:
        if file_name.endswith(".h") and f'{file_name}"' not in open(source, encoding="utf-8").read():
            continue
        base = os.path.basename(source)
        for root, _, files in os.walk(build_dir):
            if base + ".gcda" not in files or "-sanitized" in root:
                continue
            result = subprocess.run(["gcov", "-n", "-f", "-o", os.path.join(root, base + ".o"), source],
                                    capture_output=True,
                                    text=True, cwd=build_dir)
            current = None
            for line in result.stdout.splitlines():
                match = re.match(r"Function '(.+)'", line)
                if match:
                    current = match.group(1)
                    continue
                match = re.match(r"Lines executed:([0-9.]+)% of", line)
                if match and current is not None:
                    functions[current] = functions.get(current, False) or float(match.group(1)) > 0
                    current = None
    return functions


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    source_dir, build_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    faults = fault_table(source_dir)
    documented = documented_places(source_dir)
    problems, cache = [], {}
    for name, places in faults:
        where = ", ".join(f"{f} {g}" for f, g in places)
        if documented.get(name) != where:
            problems.append(f"{name}: docs/bug-classes.md says '{documented.get(name)}', "
                            f"common/fault.c '{where}'")
        for file_name, function in places:
            if file_name not in cache:
                cache[file_name] = executed_functions(build_dir, source_dir, file_name)
            executed = cache[file_name]
            if function not in executed:
                problems.append(f"{name}: no function {function} in an instrumented {file_name}")
            elif not executed[function]:
                problems.append(f"{name}: {file_name} {function} never ran in the clean runs: "
                                "the fault is planted beside the path production runs")
    for problem in problems:
        print(f"fault site: {problem}")
    print(f"# {len(faults)} faults: {len(problems)} problems with their planting sites")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
