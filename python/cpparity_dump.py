"""Read a `cpparity export` file and write per-rank dumps for `cpparity judge`.

The contract is docs/dump-format.md (rank dump, version 1); the export layout is the
`cpparity export` section of docs/command-line.md. numpy and h5py only; torch tensors are
accepted wherever an array is (converted with .detach().float().cpu().numpy(), so bfloat16
values are widened exactly to float32). A framework's test, on each of its cp ranks:

    import cpparity_dump
    export = cpparity_dump.read_export("EXPORT.h5")       # inputs, float64 weights, digest
    positions = export.token_indices("zigzag", cp, rank)  # this rank's positions, int64
    inputs = export.pad_inputs(export.padded_length(cp, chunks_per_rank=2))  # [B, Sp] each
    # load export.weights into the model; run it on `inputs` sharded by `positions`; backward
    cpparity_dump.write_rank_dump(
        f"dumps/rank_{rank}.h5", export=export, rank=rank, cp=cp, token_indices=positions,
        loss=loss, logits=logits,  # logits [B, len(positions), V], row i at positions[i]
        gradients={name: p.grad for name, p in model.named_parameters()},
        framework="torch", framework_version=torch.__version__, dtype="f32", kernel="sdpa")
    # then: cpparity judge EXPORT.h5 dumps/rank_*.h5

Layouts of `token_indices` (Sp = the padded length, k = chunks per rank):

- "contiguous" (k = 1): rank r holds [r*Sp/cp, (r+1)*Sp/cp).
- "zigzag" (k = 2): 2*cp chunks of Sp/(2*cp); rank r holds chunks r and 2*cp-1-r, in that order.
- "round-robin" (k = 2): 2*cp chunks of Sp/(2*cp); chunk c is on rank c mod cp, so rank r holds
  chunks r and r+cp, in that order. This module always uses 2*cp chunks for round-robin, two
  chunks per rank. (torch's context_parallel balances the load with the zigzag layout: its
  head-tail load balancer gives rank r chunks r and 2*cp-1-r.)

The default padded length of a layout is the smallest multiple of k*cp at least S
(docs/masks.md, automatic padding). Any other Sp >= S that is a multiple of k*cp may be given
instead (`export.token_indices(layout, cp, rank, padded_len=Sp)`, `export.pad_inputs(Sp)`), e.g.
a multiple of 64 or of cp times a kernel's block size: `cpparity judge` excludes positions >= S
from the logits error, checks them for NaN, and bounds Sp only by its memory (docs/dump-format.md,
"Padding").
"""

import os
import secrets
from dataclasses import dataclass, field

import h5py
import numpy as np

DUMP_FORMAT = "cpparity-rank-dump"
DUMP_FORMAT_VERSION = 1
DTYPES = ("f32", "bf16")
LAYOUT_CHUNKS_PER_RANK = {"contiguous": 1, "zigzag": 2, "round-robin": 2}
PAD_TOKEN_ID = 0
IGNORED_LABEL = -100


def _decode_attribute(value):
    """An HDF5 attribute as a plain Python value: bytes -> str, numpy scalars -> int/float."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray):
        if value.dtype.kind in ("S", "O", "U"):
            return [_decode_attribute(item) for item in value.tolist()]
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _to_numpy(value, floating):
    """A numpy array from a numpy array, a Python number or a torch tensor.

    With floating=True a torch tensor goes through .float() (bf16 widened exactly to float32).
    """
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        tensor = value.detach()
        if floating:
            tensor = tensor.float()
        return tensor.cpu().numpy()
    return np.asarray(value)


def layout_token_indices(layout, cp, rank, padded_len):
    """The global positions (int64 [L_r]) that `rank` of `cp` holds in `layout`.

    `padded_len` must be a multiple of cp times the layout's chunks per rank
    (LAYOUT_CHUNKS_PER_RANK); the module docstring defines the layouts.
    """
    if layout not in LAYOUT_CHUNKS_PER_RANK:
        raise ValueError(f"layout {layout!r}: expected one of {', '.join(LAYOUT_CHUNKS_PER_RANK)}")
    if not isinstance(cp, (int, np.integer)) or cp < 1:
        raise ValueError(f"cp {cp!r}: expected an integer >= 1")
    if not isinstance(rank, (int, np.integer)) or not 0 <= rank < cp:
        raise ValueError(f"rank {rank!r}: expected an integer with 0 <= rank < cp = {cp}")
    chunk_count = LAYOUT_CHUNKS_PER_RANK[layout] * cp
    if padded_len < 1 or padded_len % chunk_count != 0:
        raise ValueError(f"padded length {padded_len}: layout {layout!r} at cp {cp} needs a "
                         f"positive multiple of {chunk_count}")
    chunk = padded_len // chunk_count
    if layout == "contiguous":
        chunks = [rank]
    elif layout == "zigzag":
        chunks = [rank, 2 * cp - 1 - rank]
    else:
        chunks = [rank, rank + cp]
    return np.concatenate([np.arange(c * chunk, (c + 1) * chunk, dtype=np.int64)
                           for c in chunks])


class Logits:
    """The export's float64 reference logits [B, S, V], read from the file when indexed.

    At a long sequence and a real vocabulary they do not fit in memory (32768 x 128256 float64 is
    34 GB), so they are never read whole unless asked: `logits[b, begin:end]` reads those rows,
    `logits.blocks()` yields them one block of rows at a time, and `np.asarray(logits)` reads
    everything (fine for a short case).
    """

    def __init__(self, path, shape):
        self.path = os.fspath(path)
        self.shape = tuple(int(size) for size in shape)
        self.dtype = np.dtype(np.float64)
        self.ndim = len(self.shape)

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, key):
        with h5py.File(self.path, "r") as file:
            return np.asarray(file["reference/logits"][key], dtype=np.float64)

    def __array__(self, dtype=None, copy=None):
        values = self[()]
        return values if dtype is None else values.astype(dtype)

    def blocks(self, rows=256):
        """(batch_row, begin, end, logits [end - begin, V]) for every block of `rows` positions,
        batch row by batch row, one read each."""
        with h5py.File(self.path, "r") as file:
            dataset = file["reference/logits"]
            for batch_row in range(self.shape[0]):
                for begin in range(0, self.shape[1], rows):
                    end = min(begin + rows, self.shape[1])
                    yield batch_row, begin, end, np.asarray(dataset[batch_row, begin:end],
                                                            dtype=np.float64)


class ComputedLogits:
    """The reference logits [B, S, V] made on demand from the export's /reference/final_normed
    [B, S, D] (the LM head's input) and the LM head's weight: what a `cpparity export --no-logits`
    file offers instead of the S x V dataset. Indexed like `Logits` (`logits[b, begin:end]`,
    `logits.blocks()`), each read costs one float64 product of the rows asked for with the head.
    The values equal the stored logits to float64 rounding (numpy's product, not cpparity's), far
    below any float32 or bf16 tolerance.
    """

    def __init__(self, final_normed, head):
        self.final_normed = np.asarray(final_normed, dtype=np.float64)
        self.head = np.asarray(head, dtype=np.float64)
        self.shape = self.final_normed.shape[:2] + (self.head.shape[0],)
        self.dtype = np.dtype(np.float64)
        self.ndim = 3

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if len(key) > 3:
            raise IndexError(f"logits [B, S, V]: {len(key)} indices")
        hidden = self.final_normed[key[:2]]
        values = hidden @ self.head.T
        if len(key) == 3:
            values = values[(Ellipsis, key[2])]
        return values

    def __array__(self, dtype=None, copy=None):
        values = self[()]
        return values if dtype is None else values.astype(dtype)

    def blocks(self, rows=256):
        """(batch_row, begin, end, logits [end - begin, V]) for every block of `rows` positions."""
        for batch_row in range(self.shape[0]):
            for begin in range(0, self.shape[1], rows):
                end = min(begin + rows, self.shape[1])
                yield batch_row, begin, end, self[batch_row, begin:end]


@dataclass
class Reference:
    """The export's float64 reference outputs: loss, logits [B, S, V] (a `Logits`, read lazily;
    with --no-logits a `ComputedLogits` made from /reference/final_normed, or None for an export
    older than that dataset), grads {name: array}."""

    loss: float
    logits: object
    grads: dict


@dataclass
class Export:
    """What `read_export` returns: one case of a `cpparity export` file."""

    path: str
    case: str
    seed: int
    digest: object  # str, or None for an export written before digests existed
    model: dict  # every /model attribute, decoded (layer_types a list of str)
    inputs: dict  # input_ids, labels, attention_mask, position_ids: [B, S] arrays
    weights: dict  # name -> float64 array, model.md's names and shapes
    reference: object = None  # Reference, or None when the export has no /reference
    suite_yaml: object = None  # the suite file's text, or None without /source/suite_yaml
    suite_path: object = None  # the suite file's path (attribute `path`), or None
    parameter_names: list = field(init=False)

    def __post_init__(self):
        self.parameter_names = list(self.weights)

    @property
    def batch_size(self):
        return self.inputs["input_ids"].shape[0]

    @property
    def seq_len(self):
        return self.inputs["input_ids"].shape[1]

    @property
    def vocab_size(self):
        return int(self.model["vocab_size"])

    def padded_length(self, cp, chunks_per_rank=1):
        """The smallest multiple of cp * chunks_per_rank at least S."""
        if cp < 1 or chunks_per_rank < 1:
            raise ValueError(f"cp {cp} and chunks_per_rank {chunks_per_rank} must be >= 1")
        unit = cp * chunks_per_rank
        return -(-self.seq_len // unit) * unit

    def token_indices(self, layout, cp, rank, padded_len=None):
        """This rank's global positions (int64 [L_r]) in `layout` (module docstring).

        padded_len defaults to padded_length(cp, the layout's chunks per rank).
        """
        if padded_len is None:
            if layout not in LAYOUT_CHUNKS_PER_RANK:
                raise ValueError(f"layout {layout!r}: expected one of "
                                 f"{', '.join(LAYOUT_CHUNKS_PER_RANK)}")
            padded_len = self.padded_length(cp, LAYOUT_CHUNKS_PER_RANK[layout])
        if padded_len < self.seq_len:
            raise ValueError(f"padded length {padded_len} is shorter than S = {self.seq_len}")
        return layout_token_indices(layout, cp, rank, padded_len)

    def pad_inputs(self, padded_len):
        """The four inputs padded at their end to [B, padded_len] (docs/masks.md).

        Appended tokens: input_ids 0, attention_mask 0, position_ids 0, labels -100.
        """
        if padded_len < self.seq_len:
            raise ValueError(f"padded length {padded_len} is shorter than S = {self.seq_len}")
        fill = {"input_ids": PAD_TOKEN_ID, "attention_mask": 0, "position_ids": 0,
                "labels": IGNORED_LABEL}
        padded = {}
        for name, value in fill.items():
            array = self.inputs[name]
            out = np.full((array.shape[0], padded_len), value, dtype=array.dtype)
            out[:, :array.shape[1]] = array
            padded[name] = out
        return padded


def read_export(path):
    """Read a `cpparity export` file (docs/command-line.md) into an `Export`."""
    with h5py.File(path, "r") as file:
        model = {key: _decode_attribute(value) for key, value in file["model"].attrs.items()}
        inputs = {name: file["inputs"][name][()]
                  for name in ("input_ids", "labels", "attention_mask", "position_ids")}
        weights = {name: np.asarray(file["weights"][name][()], dtype=np.float64)
                   for name in file["weights"]}
        reference = None
        if "reference" in file:
            group = file["reference"]
            logits = None
            if "logits" in group:
                logits = Logits(path, group["logits"].shape)
            elif "final_normed" in group:
                head = "model.embed_tokens.weight" if model.get("tie_word_embeddings") else \
                    "lm_head.weight"
                logits = ComputedLogits(group["final_normed"][()], weights[head])
            reference = Reference(
                loss=float(group["loss"][()]),
                logits=logits,
                grads={name: np.asarray(group["grads"][name][()], dtype=np.float64)
                       for name in group["grads"]})
        suite_yaml = suite_path = None
        if "source/suite_yaml" in file:
            dataset = file["source/suite_yaml"]
            suite_yaml = bytes(np.asarray(dataset[()], dtype=np.uint8)).decode("utf-8")
            # docs/command-line.md puts the attribute `path` on the dataset; cpparity writes it on
            # the /source group: either is read
            for holder in (dataset, file["source"]):
                if suite_path is None and "path" in holder.attrs:
                    suite_path = _decode_attribute(holder.attrs["path"])
    return Export(path=os.fspath(path), case=model.get("case"), seed=model.get("seed"),
                  digest=model.get("digest"), model=model, inputs=inputs, weights=weights,
                  reference=reference, suite_yaml=suite_yaml, suite_path=suite_path)


def _check_token_indices(token_indices, batch_size):
    """int64 [B, L_r] from a 1-D [L_r] or 2-D [B, L_r] integer array."""
    indices = _to_numpy(token_indices, floating=False)
    if indices.dtype.kind not in "iu":
        raise ValueError(f"token_indices: expected integers, got dtype {indices.dtype}")
    if indices.ndim == 1:
        indices = np.broadcast_to(indices, (batch_size, indices.shape[0]))
    elif indices.ndim != 2 or indices.shape[0] != batch_size:
        raise ValueError(f"token_indices: expected shape [L_r] or [B={batch_size}, L_r], "
                         f"got {list(indices.shape)}")
    if indices.shape[1] > 0 and (indices != indices[0]).any():
        raise ValueError("token_indices: every batch row must hold the same positions "
                         "(dump format version 1)")
    if (indices < 0).any():
        raise ValueError(f"token_indices: negative position {int(indices.min())}")
    if np.unique(indices[0]).size != indices.shape[1]:
        raise ValueError("token_indices: a position appears twice on this rank")
    return np.ascontiguousarray(indices, dtype=np.int64)


def _check_gradients(export, gradients, gradient_slices):
    """Validated float32 gradients and (offset, float32 values) slices, every name once."""
    gradients = dict(gradients or {})
    gradient_slices = dict(gradient_slices or {})
    names = set(export.parameter_names)
    both = sorted(set(gradients) & set(gradient_slices))
    if both:
        raise ValueError(f"parameter {both[0]} is in both gradients and gradient_slices")
    unknown = sorted((set(gradients) | set(gradient_slices)) - names)
    if unknown:
        raise ValueError(f"gradient {unknown[0]}: not a parameter of the export "
                         f"(model.md's names)")
    missing = [name for name in export.parameter_names
               if name not in gradients and name not in gradient_slices]
    if missing:
        raise ValueError(f"parameter {missing[0]}: no gradient (every parameter must appear once, "
                         f"in gradients or gradient_slices); {len(missing)} missing")
    full = {}
    for name, value in gradients.items():
        if value is None:
            raise ValueError(f"gradients[{name!r}] is None (no gradient was computed)")
        array = _to_numpy(value, floating=True)
        expected = export.weights[name].shape
        if array.shape != expected:
            raise ValueError(f"gradients[{name!r}]: shape {list(array.shape)}, the parameter's "
                             f"is {list(expected)}")
        full[name] = np.ascontiguousarray(array, dtype=np.float32)
    slices = {}
    for name, pair in gradient_slices.items():
        try:
            offset, value = pair
        except (TypeError, ValueError):
            raise ValueError(f"gradient_slices[{name!r}]: expected a pair (offset, values)") \
                from None
        array = _to_numpy(value, floating=True)
        size = export.weights[name].size
        if not isinstance(offset, (int, np.integer)) or offset < 0:
            raise ValueError(f"gradient_slices[{name!r}]: offset {offset!r} is not an integer >= 0")
        if array.ndim != 1:
            raise ValueError(f"gradient_slices[{name!r}]: expected a 1-D slice of the flattened "
                             f"gradient, got shape {list(array.shape)}")
        if offset + array.shape[0] > size:
            raise ValueError(f"gradient_slices[{name!r}]: elements [{offset}, "
                             f"{offset + array.shape[0]}) exceed the parameter's {size}")
        slices[name] = (int(offset), np.ascontiguousarray(array, dtype=np.float32))
    return full, slices


def _text(value):
    """A string attribute value as fixed-length UTF-8 bytes (numpy's bytes_)."""
    return np.bytes_(str(value).encode("utf-8"))


def _checksummed_file(path):
    """A new HDF5 file in HDF5 1.10's format (checksummed metadata, as cpparity writes its own
    files: docs/results-file.md, "Integrity"), or the library's default where h5py's HDF5 is
    older than 1.10."""
    try:
        return h5py.File(path, "x", libver=("v110", "v110"))
    except ValueError:
        return h5py.File(path, "x")


def _checked_dataset(file, name, array, chunks=True):
    """A dataset with HDF5's Fletcher-32 checksum (chunked); an empty one cannot be chunked."""
    array = np.asarray(array)
    if array.size == 0 or array.ndim == 0:
        return file.create_dataset(name, data=array)
    return file.create_dataset(name, data=array, fletcher32=True, chunks=chunks)


def _row_chunks(shape, itemsize):
    """Chunks of whole rows for logits [B, L, V]: a power of two of rows (at most 256, at least 1)
    in about 1 MiB, so that `cpparity judge` reads a block of rows without decompressing more."""
    batch, length, vocab = shape
    rows = 1
    while rows < 256 and rows * 2 <= length and 2 * rows * vocab * itemsize <= (1 << 20):
        rows *= 2
    return (1, max(1, min(rows, length)), vocab)


def _lazy_logits_dataset(file, logits, shape):
    """/logits [B, L_r, V] float32 from a lazy array, written one chunk of rows at a time."""
    chunks = _row_chunks(shape, 4)
    dataset = file.create_dataset("logits", shape=shape, dtype=np.float32, fletcher32=True,
                                  chunks=chunks)
    for batch_row in range(shape[0]):
        for begin in range(0, shape[1], chunks[1]):
            end = min(begin + chunks[1], shape[1])
            rows = np.asarray(logits[batch_row:batch_row + 1, begin:end], dtype=np.float32)
            if rows.shape != (1, end - begin, shape[2]):
                raise ValueError(f"logits[{batch_row}:{batch_row + 1}, {begin}:{end}]: shape "
                                 f"{list(rows.shape)}, expected {[1, end - begin, shape[2]]}")
            dataset[batch_row:batch_row + 1, begin:end] = rows
    return dataset


def _compact_scalar(file, name, value):
    """A scalar dataset stored inside its (checksummed) object header."""
    properties = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    properties.set_layout(h5py.h5d.COMPACT)
    value = np.asarray(value)
    dataset = h5py.h5d.create(file.id, name.encode(), h5py.h5t.py_create(value.dtype),
                              h5py.h5s.create(h5py.h5s.SCALAR), dcpl=properties)
    dataset.write(h5py.h5s.ALL, h5py.h5s.ALL, value)
    return file[name]


def write_rank_dump(path, *, export, rank, cp, token_indices, loss, logits, gradients=None,
                    gradient_slices=None, framework, framework_version="", dtype, kernel):
    """Write one rank's dump, version 1 of docs/dump-format.md, atomically to `path`.

    export: an `Export` (or the export file's path). token_indices: int [L_r] (broadcast to every
    batch row) or [B, L_r]. loss: a scalar. logits: [B, L_r, V], written as float32: an array or
    tensor, or any lazy array (an h5py dataset, a numpy memmap, `ComputedLogits`: something with
    .shape that `logits[b:b+1, begin:end]` reads) for rows too many to hold, written one chunk of
    rows at a time.
    gradients: {name: full gradient}; gradient_slices: {name: (offset, 1-D values)}, elements
    [offset, offset + n) of the row-major flattened gradient. Every parameter of the export
    appears exactly once across the two. Raises ValueError on any argument that breaks the
    contract; an existing file at `path` is replaced.
    """
    if not isinstance(export, Export):
        export = read_export(export)
    if not export.digest:
        raise ValueError(f"export {export.path}: no /model attribute 'digest' (written by an older "
                         f"cpparity); export the case again")
    if not isinstance(cp, (int, np.integer)) or cp < 1:
        raise ValueError(f"cp {cp!r}: expected an integer >= 1")
    if not isinstance(rank, (int, np.integer)) or not 0 <= rank < cp:
        raise ValueError(f"rank {rank!r}: expected an integer with 0 <= rank < cp = {cp}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: expected 'f32' or 'bf16'")
    for name, text in (("framework", framework), ("kernel", kernel)):
        if not isinstance(text, str) or not text:
            raise ValueError(f"{name} {text!r}: expected a non-empty string")
    if not isinstance(framework_version, str):
        raise ValueError(f"framework_version {framework_version!r}: expected a string")

    indices = _check_token_indices(token_indices, export.batch_size)
    loss_array = _to_numpy(loss, floating=True)
    if loss_array.size != 1:
        raise ValueError(f"loss: expected a scalar, got shape {list(loss_array.shape)}")
    if loss_array.dtype.kind != "f":
        raise ValueError(f"loss: expected a floating-point value, got dtype {loss_array.dtype}")
    # a lazy array (an h5py dataset, a memmap, ComputedLogits, anything with .shape and slicing) is
    # written one block of rows at a time, never held whole
    lazy = not isinstance(logits, np.ndarray) and not hasattr(logits, "detach") and \
        hasattr(logits, "shape") and hasattr(logits, "__getitem__")
    logits_array = logits if lazy else _to_numpy(logits, floating=True)
    expected = (export.batch_size, indices.shape[1], export.vocab_size)
    if tuple(logits_array.shape) != expected:
        raise ValueError(f"logits: shape {list(logits_array.shape)}, expected [B, L_r, V] = "
                         f"{list(expected)} (L_r from token_indices)")
    full, slices = _check_gradients(export, gradients, gradient_slices)

    # a temporary name in the same folder (h5py mode "x" creates it with the umask's permissions)
    folder, base = os.path.split(os.path.abspath(path))
    temporary = os.path.join(folder, f".{base}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with _checksummed_file(temporary) as file:
            attrs = file.attrs
            # strings as fixed-length bytes: they live in the (checksummed) object header, where
            # h5py's variable-length str would go to the global heap, which has no checksum.
            # str() first: torch.__version__ is a str subclass h5py cannot convert
            attrs["format"] = _text(DUMP_FORMAT)
            attrs["format_version"] = np.int64(DUMP_FORMAT_VERSION)
            attrs["framework"] = _text(framework)
            attrs["framework_version"] = _text(framework_version)
            attrs["kernel"] = _text(kernel)
            attrs["cp"] = np.int64(cp)
            attrs["rank"] = np.int64(rank)
            attrs["dtype"] = _text(dtype)
            attrs["case"] = _text(export.case)
            attrs["seed"] = np.int64(export.seed)
            attrs["export_digest"] = _text(export.digest)
            _checked_dataset(file, "token_indices", indices)
            _compact_scalar(file, "loss", np.float64(loss_array.reshape(())))
            if lazy:
                _lazy_logits_dataset(file, logits_array, expected)
            else:
                logits_values = np.ascontiguousarray(logits_array, dtype=np.float32)
                _checked_dataset(file, "logits", logits_values,
                                 chunks=_row_chunks(logits_values.shape, 4))
            for name, array in full.items():
                _checked_dataset(file, f"gradients/{name}", array)
            for name, (offset, array) in slices.items():
                dataset = _checked_dataset(file, f"gradient_slices/{name}", array)
                dataset.attrs["offset"] = np.int64(offset)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
