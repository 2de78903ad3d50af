#!/usr/bin/env python3
"""check_export_inputs.py EXPORT.h5 SUITE.yaml CASE — what an export's /inputs hold is what their
Description attributes and docs/masks.md say, for a framework author who reads only those:

- input_ids lie in [0, vocab_size);
- attention_mask is 0 or 1, its zeros leading (left padding) or trailing (right padding);
- position_ids count on by 1 inside a document from its start (a row's start_positions, else 0,
  or, with padding_positions: continue, the left padding's count); padding has 0 (zero) or counts
  on (continue); the documents that a step other than +1 starts are the case's documents;
- labels are input_ids[t+1] where t and t+1 are real tokens of the same document, else -100.

Each description must name what it depends on (start_positions, padding_positions for
position_ids; -100 for labels). Exit 0 when everything holds, 1 with the first mismatch.
Needs numpy and h5py only: the suite is read with a minimal reader of the flow-mapping rows this
test's suite uses (tests/data/export_layouts.yaml)."""
import ast
import re
import sys

import h5py
import numpy as np


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def rows_of(suite_path, case_name):
    """The case's rows as dicts, from the flow mappings of its `rows:` list."""
    text = open(suite_path, encoding="utf-8").read()
    case = text[text.index(f"name: {case_name}"):]
    rows = []
    for line in case.split("\n")[1:]:
        line = line.strip()
        if line.startswith("- name:"):
            break
        if line.startswith("- {"):
            body = line[2:]
            body = re.sub(r"([A-Za-z_]+):", r'"\1":', body)
            body = body.replace(": continue", ': "continue"').replace(": zero", ': "zero"')
            rows.append(ast.literal_eval(body))
    return rows


def expected_row(row, seq_len):
    """attention_mask and position_ids of one row by docs/masks.md and cases/README.md."""
    left, right = row.get("left_padding", 0), row.get("right_padding", 0)
    documents, starts = row["documents"], row.get("start_positions")
    continues = row.get("padding_positions", "zero") == "continue"
    mask, positions = [], []
    count = 0
    for _ in range(left):
        mask.append(0)
        positions.append(count if continues else 0)
        count += 1
    for d, length in enumerate(documents):
        if starts is not None:
            position = starts[d]
        elif d == 0 and continues:
            position = count
        else:
            position = 0
        for _ in range(length):
            mask.append(1)
            positions.append(position)
            position += 1
        count = position
    for _ in range(right):
        mask.append(0)
        positions.append(count if continues else 0)
        count += 1
    assert len(mask) == seq_len, (len(mask), seq_len)
    return mask, positions


def main():
    export_path, suite_path, case_name = sys.argv[1:4]
    with h5py.File(export_path, "r") as export:
        vocab = int(export["/model"].attrs["vocab_size"])
        inputs = {name: export["/inputs"][name][()] for name in export["/inputs"]}
        descriptions = {
            name: export["/inputs"][name].attrs["Description"] for name in export["/inputs"]
        }
    descriptions = {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in descriptions.items()}
    for name, words in {"position_ids": ["start_positions", "padding_positions", "document"],
                        "labels": ["-100", "document"],
                        "attention_mask": ["padding"]}.items():
        for word in words:
            if word not in descriptions[name]:
                fail(f"/inputs/{name}'s Description does not mention {word}: {descriptions[name]!r}")

    ids, labels = inputs["input_ids"], inputs["labels"]
    mask, positions = inputs["attention_mask"], inputs["position_ids"]
    batch, seq_len = ids.shape
    rows = rows_of(suite_path, case_name)
    if len(rows) != batch:
        fail(f"{batch} rows exported, the case has {len(rows)}")
    if ids.min() < 0 or ids.max() >= vocab:
        fail(f"input_ids outside [0, {vocab})")
    for b, row in enumerate(rows):
        expected_mask, expected_positions = expected_row(row, seq_len)
        if not np.array_equal(mask[b], expected_mask):
            fail(f"row {b}: attention_mask {mask[b].tolist()}, expected {expected_mask}")
        if not np.array_equal(positions[b], expected_positions):
            fail(f"row {b}: position_ids {positions[b].tolist()}, expected {expected_positions}")
        # documents as docs/masks.md defines them: a step other than +1 starts one
        document = np.concatenate([[0], np.cumsum(np.diff(positions[b]) != 1)])
        for t in range(seq_len):
            real_next = t + 1 < seq_len and mask[b][t + 1] == 1 and mask[b][t] == 1
            same = real_next and document[t + 1] == document[t]
            want = ids[b][t + 1] if same else -100
            if labels[b][t] != want:
                fail(f"row {b}, position {t}: label {labels[b][t]}, expected {want}")
    print(f"{export_path}: {batch} rows hold what their descriptions and docs/masks.md say")


if __name__ == "__main__":
    main()
