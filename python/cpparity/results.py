"""Reading a `cpparity run` or `cpparity judge` results file (docs/results-file.md) into a
Verdict: its items and, for each failing one, the failures as the console names them."""
from dataclasses import dataclass, field
import math

import h5py

FORMAT = b"cpparity-results"
FORMAT_VERSION = 2
SHOWN = 8  # failing tensors an item's message lists, as the console does


class ParityError(AssertionError):
    """A parity failure: the implementation under test does not compute what the float64
    reference does within the tolerance. Its message lists each failing item and tensor with
    where it is wrong (rank, batch row, position, head), its error, its limit and where the
    limit came from; verdict is the Verdict."""

    def __init__(self, verdict):
        self.verdict = verdict
        super().__init__(verdict.describe())


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class Failure:
    """One failing tensor of one rank, as the console's FAIL line names it."""
    tensor: str            # "loss", "logits", "grads/<parameter>" or "attention/<name>"
    rank: int              # the rank of the CP group that produced it
    where: str             # e.g. "logits rank 1 batch row 0 position 37 vocab 5"
    error: float           # relative L2 error (the pass rule's)
    limit: float           # the limit of the rule that decided
    rule: str              # "naive" or "cp 1"
    reason: str            # the verdict in words
    nonfinite: int         # non-finite values where the reference is finite
    coordinates: tuple     # the element named: logits (batch row, position, vocab id), ...
    tolerance: dict        # ratio, floor, ceiling and where each came from
    batch_row: int = None  # logits and attention tensors
    position: int = None   # logits and attention tensors: the global position
    head: int = None       # attention tensors; q/k/v/o projections' gradients

    @property
    def line(self):
        """The console's line for it (without its indentation)."""
        t = self.tolerance
        return (f"FAIL {self.where}: {self.reason} (tolerance: ratio {_g(t['ratio'])} "
                f"[{t['ratio_origin']}], floor {t['floor']:.1e} [{t['floor_origin']}], ceiling "
                f"{t['ceiling']:.1e} [{t['ceiling_origin']}])")

    def __str__(self):
        return self.line


def _g(value):
    """C's %g."""
    return "%g" % value


@dataclass
class Item:
    """One run item: a case at one cp size, dtype, layout and algorithm."""
    case: str
    cp: int
    dtype: str
    layout: str        # the token layout ("contiguous", "zigzag", "round-robin", ...; "")
    algorithm: str     # "ulysses", "ring" ("" for attention level and judge)
    status: str        # "PASS", "FAIL", "REFUSED", "NOT RUN", "ERROR", "NOT CLAIMED"
    message: str
    worst_tensor: str  # "" when no tensor was compared
    error: float       # the worst tensor's error (NaN when none)
    limit: float       # its limit, of the rule that decided (NaN when none)
    rule: str          # "naive" or "cp 1" ("" when none)
    by_choice: bool    # NOT RUN on purpose (a cp = 1 run that cannot fit)
    group: str         # the item's HDF5 group, e.g. "cases/c/f32/cp_2"
    failures: list = field(default_factory=list)

    @property
    def passed(self):
        return self.status not in ("FAIL", "ERROR")


@dataclass
class Verdict:
    """What a results file says: passed when no item failed or erred."""
    path: str
    items: list
    counts: dict              # /summary: passed, failed, refused, not_run, errors, ...
    report_path: str = None   # the HTML report, when one was asked for
    console: str = ""         # what the command printed (run, judge), for the record
    implementation: str = ""  # what was judged: "cpparity cpu", "torch 2.15.0", ...

    @property
    def passed(self):
        return all(item.passed for item in self.items)

    @property
    def failures(self):
        return [failure for item in self.items for failure in item.failures]

    def describe(self):
        """What a person needs to start debugging: each failing or erring item, its failures."""
        lines = []
        for item in self.items:
            if item.passed:
                continue
            plain = item.algorithm in ("", "ulysses") and item.layout in ("", "contiguous")
            variant = "" if plain else " [" + " ".join(
                part for part in (item.layout, item.algorithm) if part) + "]"
            lines.append(f"{item.case}{variant} cp {item.cp} {item.dtype}: {item.status}"
                         + (f": {item.message}" if item.message else ""))
            lines += [f"    {failure.line}" for failure in item.failures[:SHOWN]]
            if len(item.failures) > SHOWN:
                lines.append(f"    ... {len(item.failures) - SHOWN} more failing tensors in "
                             f"{self.path} ({item.group})")
        head = (f"cpparity: {sum(not i.passed for i in self.items)} of {len(self.items)} runs "
                f"failed ({self.path})")
        return "\n".join([head] + lines)

    def raise_for_failure(self):
        """Raises ParityError when an item failed or erred; returns the verdict otherwise."""
        __tracebackhide__ = True  # pytest shows the verdict, not this frame
        if not self.passed:
            raise ParityError(self)
        return self


def _deciding(limit, cp1_limit):
    """The limit of the rule that decided (results_model/results.c results_deciding_limit)."""
    if cp1_limit > 0.0 and cp1_limit < limit:
        return cp1_limit, "cp 1"
    return limit, "naive"


def _where(row, head_dim):
    """run_item_describe_worst (results_model/results.c) from a metrics row."""
    name, rank = _text(row["tensor"]), int(row["rank"])
    w = [int(row[f"w{i}"]) for i in range(4)]
    kind = _text(row["kind"])
    facts = {}
    if name.startswith("attention/"):
        if w[3] >= 0:
            facts = {"batch_row": w[0], "position": w[1], "head": w[2]}
            return (f"{name} batch row {w[0]} position {w[1]} head {w[2]} dim {w[3]}", facts)
        facts = {"batch_row": w[0], "head": w[1], "position": w[2]}
        return f"{name} batch row {w[0]} head {w[1]} position {w[2]}", facts
    if kind == "loss":
        return f"{name} rank {rank}", facts
    if kind == "logits":
        facts = {"batch_row": w[0], "position": w[1]}
        return f"{name} rank {rank} batch row {w[0]} position {w[1]} vocab {w[2]}", facts
    if w[1] >= 0:
        head = ""
        if any(p in name for p in ("q_proj", "k_proj", "v_proj")):
            facts = {"head": w[0] // head_dim}
            head = f" (head {w[0] // head_dim})"
        elif "o_proj" in name:
            facts = {"head": w[1] // head_dim}
            head = f" (head {w[1] // head_dim})"
        return f"{name} rank {rank} row {w[0]} column {w[1]}{head}", facts
    return f"{name} rank {rank} feature {w[0]}", facts


def _failures(metrics, head_dim):
    found = []
    for row in metrics:
        if row["passed"]:
            continue
        where, facts = _where(row, head_dim)
        limit, rule = _deciding(float(row["limit"]), float(row["cp1_limit"]))
        found.append(Failure(
            tensor=_text(row["tensor"]), rank=int(row["rank"]), where=where,
            error=float(row["relative_l2"]), limit=limit, rule=rule, reason=_text(row["reason"]),
            nonfinite=int(row["nonfinite"]),
            coordinates=tuple(int(row[f"w{i}"]) for i in range(4) if row[f"w{i}"] >= 0),
            tolerance={"ratio": float(row["ratio"]), "floor": float(row["floor"]),
                       "ceiling": float(row["ceiling"]),
                       "ratio_origin": _text(row["ratio_origin"]),
                       "floor_origin": _text(row["floor_origin"]),
                       "ceiling_origin": _text(row["ceiling_origin"])},
            **facts))
    return found


def read_results(path, report_path=None, console=""):
    """The Verdict of a results file written by `cpparity run` or `cpparity judge`."""
    items = []
    with h5py.File(path, "r") as results:
        if results.attrs.get("format") != FORMAT:
            raise ValueError(f"{path}: not a cpparity results file (format "
                             f"{results.attrs.get('format')!r})")
        version = int(results.attrs.get("format_version", -1))
        if version != FORMAT_VERSION:
            raise ValueError(f"{path}: results format version {version}, this package reads "
                             f"{FORMAT_VERSION}")
        counts = {key: int(value) for key, value in results["summary"].attrs.items()}
        implementation = (_text(results["provenance"].attrs.get("implementation", b""))
                          if "provenance" in results else "")
        for case_group in results["cases"].values():
            case = _text(case_group.attrs["name"])
            head_dim = int(case_group.attrs.get("head_dim", 1)) or 1
            for dtype_group in case_group.values():
                if not isinstance(dtype_group, h5py.Group):
                    continue  # rows, document_lengths, ...
                for group in dtype_group.values():
                    if not isinstance(group, h5py.Group) or "outcome" not in group.attrs:
                        continue
                    a = group.attrs
                    metrics = group["metrics"][()] if "metrics" in group else None
                    index = int(a.get("worst_tensor_index", -1))
                    error = limit = math.nan
                    rule = ""
                    if metrics is not None and 0 <= index < len(metrics):
                        row = metrics[index]
                        error = float(row["relative_l2"])
                        limit, rule = _deciding(float(row["limit"]), float(row["cp1_limit"]))
                    status = _text(a["outcome"])
                    items.append(Item(
                        case=case, cp=int(a["cp"]), dtype=_text(a["dtype"]),
                        layout=_text(a.get("token_layout", b"")),
                        algorithm=_text(a.get("algorithm", b"")), status=status,
                        message=_text(a.get("message", b"")),
                        worst_tensor=_text(a.get("worst_tensor", b"")), error=error, limit=limit,
                        rule=rule, by_choice=bool(a.get("by_choice", 0)), group=group.name,
                        failures=_failures(metrics, head_dim)
                        if status == "FAIL" and metrics is not None else []))
    return Verdict(path=str(path), items=items, counts=counts, report_path=report_path,
                   console=console, implementation=implementation)
