#!/usr/bin/python3
"""check_file_integrity.py CPPARITY SOURCE_DIR WORK_DIR [--copies N] [--seed S]

Files you can trust (docs/results-file.md, "Integrity"):

1. Every dataset of every file cpparity writes is checksummed: an export (inputs, weights,
   masks, reference), a results file of `run --store all` (tensors, profiles, metrics, the row
   layouts) and one of `judge` (positions of zigzag ranks) each hold only datasets with the
   Fletcher-32 filter or compact ones (a scalar or an empty dataset: its data inside its object
   header), and each file is written with HDF5 1.10's format bounds (superblock version 3), whose
   object headers and B-tree nodes carry checksums.
2. Corrupted copies of the results file (N copies, each with 1 to 64 random bytes changed at
   random offsets, a fixed seed) given to `cpparity report` and `cpparity diff`: each is refused
   with exit 2, or read to the same answer (the same report page as the intact file). Never a
   signal, never exit 0 with other data.

Exit 0 when all of that holds, 1 otherwise (what failed on stderr).
"""

import argparse
import os
import random
import shutil
import subprocess
import sys

import h5py

SUPERBLOCK_V110 = 3  # the superblock version H5Pset_libver_bounds(V110, V110) writes


def fail(message):
    print(f"FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def run(command, cwd=None, expect=(0,)):
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    if done.returncode not in expect:
        fail(f"{' '.join(command)}: exit {done.returncode}\n{done.stdout[-2000:]}"
             f"{done.stderr[-2000:]}")
    return done


def unchecked_datasets(path):
    """The datasets of path with neither Fletcher-32 nor a compact layout."""
    datasets, unchecked = [], []

    def visit(name, item):
        if isinstance(item, h5py.Dataset):
            datasets.append(name)
            compact = item.id.get_create_plist().get_layout() == h5py.h5d.COMPACT
            if not item.fletcher32 and not compact:
                unchecked.append(name)

    with h5py.File(path, "r") as file:
        file.visititems(visit)
    return unchecked, len(datasets)


def superblock_version(path):
    with open(path, "rb") as file:
        head = file.read(9)
    if head[:8] != b"\x89HDF\r\n\x1a\n":
        fail(f"{path}: no HDF5 signature at offset 0")
    return head[8]


def check_checksummed(path):
    unchecked, count = unchecked_datasets(path)
    if unchecked:
        fail(f"{path}: {len(unchecked)} of {count} datasets without a checksum: "
             f"{', '.join(unchecked[:8])}")
    version = superblock_version(path)
    if version != SUPERBLOCK_V110:
        fail(f"{path}: superblock version {version}, expected {SUPERBLOCK_V110} (HDF5 1.10 bounds)")
    print(f"checksummed: {os.path.basename(path)}: {count} datasets, superblock v{version}")


def corrupt(data, rng):
    """A copy of data with 1 to 64 bytes changed at random offsets."""
    copy = bytearray(data)
    for _ in range(rng.randint(1, 64)):
        offset = rng.randrange(len(copy))
        copy[offset] = (copy[offset] + rng.randint(1, 255)) % 256
    return bytes(copy)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cpparity")
    parser.add_argument("source_dir")
    parser.add_argument("work")
    parser.add_argument("--copies", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    cpparity = os.path.abspath(args.cpparity)
    suite = os.path.join(args.source_dir, "cases", "ci.yaml")
    shutil.rmtree(args.work, ignore_errors=True)
    intact_dir = os.path.join(args.work, "intact")
    os.makedirs(intact_dir)

    # 1. what cpparity writes
    case = "packed-documents-spanning-ranks-with-length-1"
    export = os.path.join(args.work, "export.h5")
    run([cpparity, "export", suite, "--case", case, "-o", export])
    check_checksummed(export)
    results = os.path.join(intact_dir, "results.h5")
    # the items at cp 1 and those of ring attention on the zigzag layout (every kind of dataset a
    # results file has, 4 MB): with every layout and algorithm the file is 27 MB, and each of
    # the copies below is written and read whole, twice
    run([cpparity, "run", suite, "--comm", "local", "--case", case, "--case", "autopad-length-17",
         "--algorithm", "ring", "--layout", "zigzag", "--store", "all", "--out", results])
    check_checksummed(results)
    dumps = os.path.join(args.work, "dumps")
    run([sys.executable, os.path.join(args.source_dir, "tests", "judge", "make_dumps.py"), export,
         dumps, "--cp", "2", "--layout", "zigzag"])
    judged = os.path.join(args.work, "judged.h5")
    run([cpparity, "judge", export, os.path.join(dumps, "rank_0.h5"),
         os.path.join(dumps, "rank_1.h5"), "--out", judged])
    check_checksummed(judged)

    # 2. corrupted copies: exit 2, or the same page as the intact file
    run([cpparity, "report", "results.h5", "-o", "page.html"], cwd=intact_dir)
    with open(os.path.join(intact_dir, "page.html"), "rb") as page:
        intact_page = page.read()
    with open(results, "rb") as file:
        data = file.read()
    rng = random.Random(args.seed)
    copy_dir = os.path.join(args.work, "copy")
    counts = {"refused": 0, "same": 0}
    for copy in range(args.copies):
        shutil.rmtree(copy_dir, ignore_errors=True)
        os.makedirs(copy_dir)
        with open(os.path.join(copy_dir, "results.h5"), "wb") as file:
            file.write(corrupt(data, rng))
        report = run([cpparity, "report", "results.h5", "-o", "page.html"], cwd=copy_dir,
                     expect=(0, 2))
        if report.returncode == 0:
            with open(os.path.join(copy_dir, "page.html"), "rb") as page:
                if page.read() != intact_page:
                    keep = os.path.join(args.work, f"different-{copy}.h5")
                    shutil.copy(os.path.join(copy_dir, "results.h5"), keep)
                    fail(f"copy {copy}: `cpparity report` exit 0 with another page (kept as "
                         f"{keep})")
            counts["same"] += 1
        else:
            if "results.h5" not in report.stderr + report.stdout:
                fail(f"copy {copy}: refused without naming the file: {report.stderr[-400:]}")
            counts["refused"] += 1
        run([cpparity, "diff", results, os.path.join(copy_dir, "results.h5")], expect=(0, 1, 2))
    print(f"corrupted copies: {args.copies} (seed {args.seed}): {counts['refused']} refused with "
          f"exit 2, {counts['same']} read to the same page, none crashed or read otherwise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
