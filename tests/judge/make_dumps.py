#!/usr/bin/env python3
"""A "perfect framework" for testing `cpparity judge`: rank dumps made from an export's reference.

    make_dumps.py EXPORT.h5 OUT_DIR --cp N [--layout contiguous|zigzag|round-robin]
                  [--dtype f32|bf16] [--gradients full|slices] [--padded-length SP]
                  [--framework-version TEXT] [--lazy] [--wrong NAME | --malformed NAME]

Writes OUT_DIR/rank_<r>.h5 for r in 0..N-1 with python/cpparity_dump.py (docs/dump-format.md),
one line per file. Stale rank_<n>.h5 files in OUT_DIR are removed first. The outputs are the
export's float64 reference, stored as a correct implementation would store them
(docs/model.md, precision): logits float32, or for bf16 rounded to bfloat16 (nearest, ties to
even) and widened back; loss and gradients float32 in both dtypes. The sequence is padded to the
layout's padded length, or to SP with --padded-length (a multiple of cp times the layout's chunks
per rank, as frameworks pad to multiples of 64 or of cp times a block size); logits rows at
positions >= S are zeros. With `--gradients slices`
rank r holds the r-th of N contiguous, as-even-as-possible pieces of each flattened gradient
(possibly empty).

--wrong NAME plants a numerical error: the dumps are well formed, the judge must FAIL (exit 1).
Past LAZY_ELEMENTS logits (a long case) each rank's logits are made from the export one block of
rows at a time and never held whole (the export's /reference/logits read lazily, or computed from
/reference/final_normed when it was exported with --no-logits); only last-block-element is
planted then.
--malformed NAME breaks the structure: the judge must refuse (exit 2). WRONG and MALFORMED below
say what each changes. Exit status: 0 written, 2 usage error (message on stderr).
"""

import argparse
import os
import re
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import cpparity_dump  # noqa: E402

NOT_REDUCED_PARAMETER = "model.layers.0.self_attn.q_proj.weight"

WRONG = {
    "logits-rows-swapped": "rank cp-1: /logits rows of two real positions swapped in batch row 0",
    "zigzag-second-chunk-reversed": "rank 0: /token_indices list chunk 2cp-1 before chunk 0, "
                                    "/logits in the true order",
    "gradient-not-reduced": f"rank 1: {NOT_REDUCED_PARAMETER}'s gradient scaled by 1/cp",
    "loss-mean-of-means": "every rank: /loss times 1.05",
    "logits-noise": "rank 0: /logits + 1e-2 * rms(logits) * N(0, 1)",
    "padding-nan": "the rank holding position Sp-1 (automatic padding): NaN in its /logits row "
                   "there, batch row 0, vocabulary entry 0",
    "last-block-element": "the rank holding the last real position of batch row 0: its logits "
                          "there at vocabulary entry V-1 off by 1e-3 of the row's largest",
}

# Past this many logits elements (B x Sp x V) the dumps are written one block of rows at a time
# from the export's reference (read lazily, or made from /reference/final_normed): a long case's
# logits are never held whole (docs/architecture.md, "Long context: row blocks").
LAZY_ELEMENTS = 1 << 27

MALFORMED = {
    "missing-rank": "rank cp-1: not written",
    "duplicate-rank": "rank cp-1: attribute rank = 0",
    "cp-disagree": "rank cp-1: attribute cp = cp + 1",
    "wrong-digest": "rank 0: attribute export_digest's last hex digit changed",
    "wrong-version": "rank 0: attribute format_version = 2",
    "missing-gradient": "rank 0: the first parameter's /gradients (or /gradient_slices) dataset "
                        "deleted",
    "extra-gradient": "rank 0: /gradients/bogus added (float32 [4])",
    "wrong-logits-shape": "rank 0: /logits [B, L_r, V-1] (last vocabulary column dropped)",
    "indices-overlap": "rank 1: /token_indices[:, 0] = rank 0's first position",
    "indices-out-of-range": "rank cp-1: /token_indices[:, -1] = the padded length",
    "not-a-dump": "rank 0: attribute format deleted",
    "slices-hole": "rank 0: the first parameter's /gradient_slices dataset shortened by one",
}

NEEDS_TWO_RANKS = {"gradient-not-reduced", "duplicate-rank", "indices-overlap"}


class UsageError(Exception):
    """A combination of arguments (or an export) this tool cannot serve; exit 2."""


def round_to_bfloat16(values):
    """float32 values rounded to bfloat16 (nearest, ties to even), widened back to float32."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    bits = values.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    result = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(values), values, result)


def flat_slice_bounds(size, cp, rank):
    """[start, stop) of rank's piece when `size` elements are split into cp contiguous pieces."""
    base, extra = divmod(size, cp)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def parse_arguments(argv):
    epilog = "\n".join(["--wrong:"] + [f"  {name}: {what}" for name, what in WRONG.items()]
                       + ["--malformed:"]
                       + [f"  {name}: {what}" for name, what in MALFORMED.items()])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=epilog,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", help="a `cpparity export` file with /reference")
    parser.add_argument("out_dir", help="where rank_<r>.h5 are written (created if missing)")
    parser.add_argument("--cp", type=int, required=True, help="number of ranks")
    parser.add_argument("--layout", choices=list(cpparity_dump.LAYOUT_CHUNKS_PER_RANK),
                        help="token layout (default contiguous; zigzag for "
                             "zigzag-second-chunk-reversed)")
    parser.add_argument("--dtype", choices=cpparity_dump.DTYPES, default="f32")
    parser.add_argument("--padded-length", type=int,
                        help="pad the sequence to this length (default: the least the layout "
                             "needs)")
    parser.add_argument("--framework-version", default="1",
                        help="the dumps' framework_version attribute (default 1; may be empty)")
    parser.add_argument("--gradients", choices=("full", "slices"),
                        help="full gradients on every rank, or one flat slice per rank "
                             "(default full; slices for slices-hole)")
    plant = parser.add_mutually_exclusive_group()
    parser.add_argument("--lazy", action="store_true",
                        help="write the logits one block of rows at a time however few they are "
                             "(automatic past LAZY_ELEMENTS)")
    plant.add_argument("--wrong", choices=list(WRONG), help="plant a numerical error")
    plant.add_argument("--malformed", choices=list(MALFORMED), help="plant a structural error")
    args = parser.parse_args(argv)

    if args.cp < 1:
        raise UsageError(f"--cp {args.cp}: expected >= 1")
    if args.padded_length is not None and args.padded_length < 1:
        raise UsageError(f"--padded-length {args.padded_length}: expected >= 1")
    plant_name = args.wrong or args.malformed
    if plant_name in NEEDS_TWO_RANKS and args.cp < 2:
        raise UsageError(f"{plant_name} needs --cp >= 2")
    if args.wrong == "zigzag-second-chunk-reversed":
        if args.layout not in (None, "zigzag"):
            raise UsageError("zigzag-second-chunk-reversed needs --layout zigzag")
        args.layout = "zigzag"
    if args.malformed == "slices-hole":
        if args.gradients not in (None, "slices"):
            raise UsageError("slices-hole needs --gradients slices")
        args.gradients = "slices"
    args.layout = args.layout or "contiguous"
    args.gradients = args.gradients or "full"
    return args


def stored_loss_and_gradients(export):
    """The reference's loss and gradients as a correct implementation stores them (float32)."""
    gradients = {name: export.reference.grads[name].astype(np.float32)
                 for name in export.parameter_names}
    return np.float32(export.reference.loss), gradients


def stored_outputs(export, dtype, padded_len):
    """The reference as a correct implementation stores it: loss, padded logits, gradients."""
    logits = np.zeros((export.batch_size, padded_len, export.vocab_size), dtype=np.float32)
    logits[:, :export.seq_len] = export.reference.logits
    if dtype == "bf16":
        logits = round_to_bfloat16(logits)
    loss, gradients = stored_loss_and_gradients(export)
    return loss, logits, gradients


class RankLogits:
    """One rank's padded logits [B, L_r, V] as a correct implementation stores them, made from the
    export's reference one slice of rows at a time (a lazy array for write_rank_dump)."""

    def __init__(self, export, indices, dtype, plant=None):
        self.reference = export.reference.logits
        self.seq_len = export.seq_len
        self.indices = np.asarray(indices)
        self.dtype_name = dtype
        self.plant = plant  # (batch_row, local_row, vocab, delta) or None
        self.shape = (export.batch_size, len(self.indices), export.vocab_size)

    def __getitem__(self, key):
        rows_b, rows = key
        positions = self.indices[rows]
        values = np.zeros((rows_b.stop - rows_b.start, len(positions), self.shape[2]),
                          dtype=np.float32)
        real = np.nonzero(positions < self.seq_len)[0]
        wanted = positions[real]
        consecutive = len(wanted) > 0 and np.all(np.diff(wanted) == 1)
        for out, b in enumerate(range(rows_b.start, rows_b.stop)):
            if consecutive:  # one read of a run of rows (the usual case: a chunk of a layout)
                values[out, real] = self.reference[b, int(wanted[0]):int(wanted[-1]) + 1]
            elif len(real) > 0:
                values[out, real] = self.reference[b, wanted]
        if self.dtype_name == "bf16":
            values = round_to_bfloat16(values)
        if self.plant is not None:
            b, local, vocab, delta = self.plant
            first = rows.start or 0
            if rows_b.start <= b < rows_b.stop and first <= local < first + len(positions):
                values[b - rows_b.start, local - first, vocab] += np.float32(delta)
        return values


def real_local_rows(export, indices):
    """Local rows of `indices` whose position is a real token (< S, mask 1) in batch row 0."""
    mask = export.inputs["attention_mask"][0]
    return [i for i, position in enumerate(indices)
            if position < export.seq_len and mask[position] == 1]


def plant_wrong(name, export, args, rank, indices, loss, logits, gradients, slices):
    """Apply --wrong `name` to this rank's values in place; returns (indices, loss, description)."""
    cp = args.cp
    if name == "logits-rows-swapped" and rank == cp - 1:
        rows = real_local_rows(export, indices)
        if len(rows) < 2:
            raise UsageError(f"logits-rows-swapped: rank {rank} holds {len(rows)} real rows, "
                             f"needs 2")
        first, second = rows[0], rows[1]
        logits[0, [first, second]] = logits[0, [second, first]]
        return indices, loss, (f"/logits[0] rows {first} and {second} (positions "
                               f"{indices[first]}, {indices[second]}) swapped")
    if name == "zigzag-second-chunk-reversed" and rank == 0:
        half = len(indices) // 2
        swapped = np.concatenate([indices[half:], indices[:half]])
        return swapped, loss, "/token_indices chunks written in swapped order"
    if name == "gradient-not-reduced" and rank == 1:
        parameter = NOT_REDUCED_PARAMETER
        if parameter not in export.parameter_names:
            raise UsageError(f"gradient-not-reduced: the export has no {parameter}")
        if parameter in gradients:
            gradients[parameter] /= cp
        else:
            slices[parameter][1][:] /= cp
        return indices, loss, f"{parameter} scaled by 1/{cp}"
    if name == "loss-mean-of-means":
        return indices, np.float32(loss * 1.05), "/loss times 1.05"
    if name == "padding-nan":
        padded_len = args.padded_len
        if padded_len <= export.seq_len:
            raise UsageError("padding-nan: the sequence has no padding (--padded-length)")
        where = [i for i, position in enumerate(indices) if position == padded_len - 1]
        if where:
            logits[0, where[0], 0] = np.float32("nan")
            return indices, loss, f"/logits[0, {where[0]}, 0] (position {padded_len - 1}) = NaN"
        return indices, loss, ""
    if name == "logits-noise" and rank == 0:
        rng = np.random.default_rng(0)
        scale = 1e-2 * np.sqrt(np.mean(np.square(logits, dtype=np.float64)))
        logits += (scale * rng.standard_normal(logits.shape)).astype(np.float32)
        return indices, loss, "/logits + 1e-2 relative noise"
    return indices, loss, ""


def plant_malformed(name, path, args, rank, padded_len, first_rank_index):
    """Apply --malformed `name` to the written dump of `rank` at `path`; returns a description."""
    cp = args.cp
    with h5py.File(path, "r+") as file:
        gradient_group = "gradient_slices" if args.gradients == "slices" else "gradients"
        first_parameter = sorted(file[gradient_group])[0]
        if name == "duplicate-rank" and rank == cp - 1:
            file.attrs["rank"] = np.int64(0)
            return "attribute rank = 0"
        if name == "cp-disagree" and rank == cp - 1:
            file.attrs["cp"] = np.int64(cp + 1)
            return f"attribute cp = {cp + 1}"
        if name == "wrong-digest" and rank == 0:
            digest = file.attrs["export_digest"]
            digest = digest.decode() if isinstance(digest, bytes) else digest
            changed = digest[:-1] + format((int(digest[-1], 16) + 1) % 16, "x")
            file.attrs["export_digest"] = changed
            return f"attribute export_digest = {changed}"
        if name == "wrong-version" and rank == 0:
            file.attrs["format_version"] = np.int64(2)
            return "attribute format_version = 2"
        if name == "missing-gradient" and rank == 0:
            del file[f"{gradient_group}/{first_parameter}"]
            return f"/{gradient_group}/{first_parameter} deleted"
        if name == "extra-gradient" and rank == 0:
            file.create_dataset("gradients/bogus", data=np.zeros(4, dtype=np.float32))
            return "/gradients/bogus added"
        if name == "wrong-logits-shape" and rank == 0:
            logits = file["logits"][()]
            del file["logits"]
            file.create_dataset("logits", data=logits[:, :, :-1])
            return f"/logits shape {list(logits[:, :, :-1].shape)}"
        if name == "indices-overlap" and rank == 1:
            file["token_indices"][:, 0] = first_rank_index
            return f"/token_indices[:, 0] = {first_rank_index} (rank 0's)"
        if name == "indices-out-of-range" and rank == cp - 1:
            file["token_indices"][:, -1] = padded_len
            return f"/token_indices[:, -1] = {padded_len}"
        if name == "not-a-dump" and rank == 0:
            del file.attrs["format"]
            return "attribute format deleted"
        if name == "slices-hole" and rank == 0:
            for parameter in sorted(file["gradient_slices"]):
                dataset = file[f"gradient_slices/{parameter}"]
                if dataset.shape[0] > 0:
                    values, offset = dataset[()], dataset.attrs["offset"]
                    del file[f"gradient_slices/{parameter}"]
                    shortened = file.create_dataset(f"gradient_slices/{parameter}",
                                                    data=values[:-1])
                    shortened.attrs["offset"] = offset
                    return (f"/gradient_slices/{parameter} shortened to {values.shape[0] - 1} "
                            f"(element {offset + values.shape[0] - 1} uncovered)")
            raise UsageError("slices-hole: every slice of rank 0 is empty")
    return ""


def remove_stale_dumps(out_dir):
    for entry in sorted(os.listdir(out_dir)):
        if re.fullmatch(r"rank_\d+\.h5", entry):
            os.unlink(os.path.join(out_dir, entry))
            print(f"{os.path.join(out_dir, entry)}: removed (stale)")


def make_dumps(args):
    export = cpparity_dump.read_export(args.export)
    if export.reference is None:
        raise UsageError(f"{args.export}: no /reference in the export")
    cp = args.cp
    padded_len = args.padded_length or export.padded_length(
        cp, cpparity_dump.LAYOUT_CHUNKS_PER_RANK[args.layout])
    args.padded_len = padded_len
    lazy = export.batch_size * padded_len * export.vocab_size > LAZY_ELEMENTS or \
        args.lazy or args.wrong == "last-block-element"
    if lazy and (args.malformed or (args.wrong and args.wrong != "last-block-element")):
        raise UsageError(f"{args.export}: logits too large to hold; only --wrong "
                         f"last-block-element is planted in them")
    if lazy:
        loss, gradients = stored_loss_and_gradients(export)
        padded_logits = None
    else:
        loss, padded_logits, gradients = stored_outputs(export, args.dtype, padded_len)
    os.makedirs(args.out_dir, exist_ok=True)
    remove_stale_dumps(args.out_dir)
    first_rank_index = export.token_indices(args.layout, cp, 0, padded_len)[0]

    for rank in range(cp):
        path = os.path.join(args.out_dir, f"rank_{rank}.h5")
        if args.malformed == "missing-rank" and rank == cp - 1:
            print(f"{path}: not written (malformed missing-rank)")
            continue
        indices = export.token_indices(args.layout, cp, rank, padded_len)
        planted = ""
        if lazy:
            plant = None
            if args.wrong == "last-block-element":
                mask = export.inputs["attention_mask"][0]
                last = int(np.nonzero(mask[:export.seq_len])[0][-1])
                local = np.nonzero(np.asarray(indices) == last)[0]
                if len(local) > 0:
                    row = export.reference.logits[0, last:last + 1][0]
                    delta = 1e-3 * float(np.max(np.abs(row)))
                    plant = (0, int(local[0]), export.vocab_size - 1, delta)
                    planted = (f"/logits[0, {int(local[0])}, {export.vocab_size - 1}] "
                               f"(position {last}) + {delta:.3g}")
            logits = RankLogits(export, indices, args.dtype, plant)
        else:
            logits = padded_logits[:, indices].copy()
        full, slices = {}, {}
        for name in export.parameter_names:
            if args.gradients == "full":
                full[name] = gradients[name].copy()
            else:
                start, stop = flat_slice_bounds(gradients[name].size, cp, rank)
                slices[name] = (start, gradients[name].reshape(-1)[start:stop].copy())
        rank_loss = loss
        if args.wrong and not lazy:
            indices, rank_loss, planted = plant_wrong(args.wrong, export, args, rank, indices,
                                                      loss, logits, full, slices)
        cpparity_dump.write_rank_dump(
            path, export=export, rank=rank, cp=cp, token_indices=indices, loss=rank_loss,
            logits=logits, gradients=full, gradient_slices=slices,
            framework="cpparity-make-dumps", framework_version=args.framework_version,
            dtype=args.dtype,
            kernel="float64 reference")
        if args.malformed:
            planted = plant_malformed(args.malformed, path, args, rank, padded_len,
                                      first_rank_index)
        line = (f"{path}: rank {rank} of {cp}, {args.layout}, {len(indices)} rows of "
                f"{padded_len}, {args.dtype}, gradients {args.gradients}")
        plant_name = args.wrong or args.malformed
        print(line + (f"; {plant_name}: {planted}" if planted else ""))


def main(argv):
    try:
        make_dumps(parse_arguments(argv))
    except (UsageError, ValueError) as error:
        print(f"make_dumps.py: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
