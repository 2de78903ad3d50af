"""Whether two results files judged the same items alike: the same outcome, message and, for
every compared tensor, the same error, limit, verdict and worst coordinates, bit for bit.

    python3 compare_judgements.py A.h5 B.h5

Used by check_kernel_dump_equals_plugin.sh: `cpparity judge` of a plugin's kernel dump against
`cpparity run --kernel` of the plugin itself. Exit 0 when alike; 1 naming the first difference.
"""

import re
import sys

import h5py
import numpy as np

FIELDS = ("tensor", "count", "compared", "nonfinite", "first_nonfinite", "relative_l2",
          "worst_index", "w0", "w1", "w2", "w3", "baseline_error", "limit", "passed", "reason")


def message(text):
    """An item's message, with the words a kernel dump's refusal of a layer adds: a layer the
    dump marks unsupported is refused through the replayed kernel's supports() ("NAME declines
    it: REASON") where run reports the missing capability itself ("REASON")."""
    text = text.decode() if isinstance(text, bytes) else text
    return re.sub(r"[^ ():;]+ declines it: ", "", text)


def items(path):
    found = {}
    with h5py.File(path, "r") as results:
        for case_name, case in results["cases"].items():
            for dtype, group in case.items():
                if not isinstance(group, h5py.Group) or dtype not in ("f32", "bf16"):
                    continue
                for item_name, item in group.items():
                    metrics = item["metrics"][...]
                    found[(case_name, dtype, item_name)] = (
                        item.attrs["outcome"], message(item.attrs["message"]),
                        {field: metrics[field] for field in FIELDS})
    return found


def main():
    first, second = (items(path) for path in sys.argv[1:3])
    if sorted(first) != sorted(second):
        sys.exit(f"different items: {sorted(set(first) ^ set(second))[:5]}")
    for key in sorted(first):
        (outcome_a, message_a, metrics_a), (outcome_b, message_b, metrics_b) = first[key], second[key]
        if outcome_a != outcome_b or message_a != message_b:
            sys.exit(f"{key}: {outcome_a} {message_a!r}\n   vs {outcome_b} {message_b!r}")
        for field in FIELDS:
            a, b = metrics_a[field], metrics_b[field]
            same = (np.array_equal(a, b, equal_nan=True) if a.dtype.kind == "f"
                    else np.array_equal(a, b))
            if not same:
                sys.exit(f"{key}: metrics field {field} differs: {a} vs {b}")
    print(f"{len(first)} items judged alike")


if __name__ == "__main__":
    main()
