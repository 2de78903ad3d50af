"""Read an attention-level `cpparity export` and write the kernel dump `cpparity judge` judges.

The contract is docs/dump-format.md, "The kernel dump: judging an attention kernel called from
Python": the export holds, per case and layer, the inputs q, k, v, dout (float32), the compact
mask description and the float64 reference out, lse, dq, dk, dv; the kernel dump holds what the
kernel computed from them. numpy and h5py only; torch is imported only by `mask_mod` (a
flex_attention mask), and torch tensors are accepted wherever an array is (converted with
.detach().float().cpu().numpy(), so bfloat16 values are widened exactly to float32). A test:

    import cpparity_kernel
    export = cpparity_kernel.read_attention_export("EXPORT.h5")  # cpparity export SUITE.yaml
    with cpparity_kernel.KernelDumpWriter(
            "DUMP.h5", export, kernel="mine", kernel_version="1.0", framework="torch",
            framework_version=torch.__version__, backward_uses_out_lse=False) as dump:
        for case in export.cases:
            for layer in case.layers:
                allowed = layer.allowed()        # bool [B, S, S], or layer.mask_mod() for flex
                out, lse = my_forward(layer.q, layer.k, layer.v, allowed, case.scale)
                dq, dk, dv = my_backward(layer.dout, ...)
                dump.write_layer(case, layer, out, lse, dq, dk, dv)
                # or: dump.unsupported(case, layer, "no chunked layers")
    # then: cpparity judge EXPORT.h5 DUMP.h5

Layouts (row-major, the C ABI's, include/cpparity/kernel.h): q, out, dq, dout [B, S, H, Dh];
k, v, dk, dv [B, S, Hkv, Dh]; lse [B, H, S] in natural log. Query head j reads key/value head
j // (H // Hkv). A fully masked query row (no allowed key) has out 0 and lse -inf.

What the writer's root attributes promise, and what each layer then needs:
  - backward_uses_out_lse=True (the kernel's backward takes out and lse): `backward_alone`, the
    backward given the reference's out and lse rounded to float32 (layer.given_out,
    layer.given_lse). False (autograd recomputes the forward): nothing more.
  - deterministic=True: `again`, a second forward and backward on the same inputs, which the
    judge requires to equal the first bit for bit.
  - block_calls=True: `blocks`, every pair of case.block_pairs(): the query block against the key
    block alone (out and lse over the block's keys: a row with no allowed key there has out 0 and
    lse -inf) and the block's share of the gradients given the reference's out and lse of the
    query rows over every key (layer.given_out[:, query_index], layer.given_lse[:, :, query_index]).

Unwritten elements: cpparity fills a C plugin's outputs with NaN before each call, so that an
element the kernel never writes fails as non-finite. A Python kernel allocates its own outputs;
one that writes into buffers it is given should be given `poisoned_like(...)` ones, for the same
check.
"""

import os
import secrets
from dataclasses import dataclass

import h5py
import numpy as np

from cpparity_dump import (_checked_dataset, _checksummed_file, _decode_attribute, _text,
                           _to_numpy)

EXPORT_FORMAT = "cpparity-attention-export"
EXPORT_FORMAT_VERSION = 1
DUMP_FORMAT = "cpparity-kernel-dump"
DUMP_FORMAT_VERSION = 1
LAYER_TYPES = ("full", "sliding", "chunked")
CHUNK_ORIGINS = ("row", "document", "position")
QUERY_BLOCKS = 2
KEY_BLOCKS = 3
# the most elements (B * Sq * Sk) a dense mask is built with; beyond it, mask_mod
DENSE_MASK_LIMIT = 1 << 28
OUTPUT_NAMES = ("out", "lse", "dq", "dk", "dv")
GRADIENT_NAMES = ("dq", "dk", "dv")


# --- the mask ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class MaskDescription:
    """One case's compact mask description (docs/dump-format.md), numpy arrays."""

    attention_mask: np.ndarray  # int8 [B, S]: 1 real token, 0 padding
    position_ids: np.ndarray    # int64 [B, S]
    key_valid: np.ndarray       # int8 [B, S]: 1 the key may be attended
    document: np.ndarray        # int64 [B, S]: document id, never decreasing along a row
    document_start: np.ndarray  # int64 [B, S]: index of the first token of each token's document
    position: np.ndarray        # int64 [B, S]: the positions chunk_origin "position" counts in
    left_padding: np.ndarray    # int64 [B]: leading padding tokens of each row

    @property
    def batch(self):
        return self.key_valid.shape[0]

    @property
    def seq_len(self):
        return self.key_valid.shape[1]


def _check_rule(layer_type, window, chunk_size, chunk_origin):
    if layer_type not in LAYER_TYPES:
        raise ValueError(f"layer_type {layer_type!r}: expected one of {', '.join(LAYER_TYPES)}")
    if layer_type == "sliding" and window < 1:
        raise ValueError(f"window {window}: a sliding layer needs a window >= 1")
    if layer_type == "chunked" and chunk_size < 1:
        raise ValueError(f"chunk_size {chunk_size}: a chunked layer needs a chunk size >= 1")
    if layer_type == "chunked" and chunk_origin not in CHUNK_ORIGINS:
        raise ValueError(f"chunk_origin {chunk_origin!r}: expected one of "
                         f"{', '.join(CHUNK_ORIGINS)}")


def _token_indices(index, seq_len, what):
    """int64 [n] global token indices in [0, seq_len): 0 .. seq_len-1 when index is None."""
    if index is None:
        return np.arange(seq_len, dtype=np.int64)
    array = _to_numpy(index, floating=False)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise ValueError(f"{what}: expected a 1-D integer array, got shape {list(array.shape)} "
                         f"dtype {array.dtype}")
    if array.size and (array.min() < 0 or array.max() >= seq_len):
        raise ValueError(f"{what}: token indices must lie in [0, {seq_len})")
    return array.astype(np.int64)


def allowed_mask(mask, layer_type, window, chunk_size, chunk_origin, query_index=None,
                 key_index=None):
    """The mask of docs/masks.md as a dense numpy bool array [B, Sq, Sk].

    allowed = k <= q && key_valid[b][k] && document[b][q] == document[b][k]
              && (layer_type != sliding || k > q - window)
              && (layer_type != chunked || chunk(k) == chunk(q))
    with chunk(t) = floor((t - o) / chunk_size), o = left_padding[b] (chunk_origin row) or
    document_start[b][q] (document), or chunk(t) = floor(position[b][t] / chunk_size) (position).
    Row i of the result is token query_index[i], column j token key_index[j] (global indices,
    any order; the whole sequence when None). `AttentionLayer.allowed` calls this with the
    layer's own rule; a test planting a bug calls it with another.
    """
    _check_rule(layer_type, window, chunk_size, chunk_origin)
    query = _token_indices(query_index, mask.seq_len, "query_index")
    key = _token_indices(key_index, mask.seq_len, "key_index")
    elements = mask.batch * query.size * key.size
    if elements > DENSE_MASK_LIMIT:
        raise ValueError(f"a dense mask of B*Sq*Sk = {mask.batch}*{query.size}*{key.size} "
                         f"elements is over the limit of {DENSE_MASK_LIMIT}: use mask_mod(), or "
                         f"blocks of query_index and key_index")
    q = query[:, None]
    k = key[None, :]
    allowed = np.empty((mask.batch, query.size, key.size), dtype=bool)
    for b in range(mask.batch):  # one row at a time: int64 temporaries of [Sq, Sk] only
        row = (k <= q) & (mask.key_valid[b, key] != 0)[None, :]
        row &= mask.document[b, query][:, None] == mask.document[b, key][None, :]
        if layer_type == "sliding":
            row &= k > q - window
        elif layer_type == "chunked":
            if chunk_origin == "position":
                query_chunk = mask.position[b, query][:, None] // chunk_size
                key_chunk = mask.position[b, key][None, :] // chunk_size
            else:
                origin = (mask.left_padding[b] if chunk_origin == "row"
                          else mask.document_start[b, query][:, None])
                # numpy's // on integers is floor division (toward -inf), as masks.md's fdiv
                query_chunk = (q - origin) // chunk_size
                key_chunk = (k - origin) // chunk_size
            row &= query_chunk == key_chunk
        allowed[b] = row
    return allowed


def poisoned_like(array):
    """A buffer shaped as array, filled with NaN (float32 for a numpy array; a torch tensor's
    own dtype and device): an element a kernel writing into it never writes stays NaN, and the
    judge names the first one."""
    if hasattr(array, "new_full"):  # a torch tensor: one on its device
        return array.new_full(array.shape, float("nan"), dtype=array.dtype)
    return np.full(np.shape(array), np.nan, dtype=np.float32)


def _import_torch():
    try:
        import torch
    except ImportError as error:
        raise ImportError("mask_mod needs torch (a flex_attention mask_mod is made of torch "
                          "tensors); allowed() needs numpy only") from error
    return torch


def mask_mod(mask, layer_type, window, chunk_size, chunk_origin, query_index=None,
             key_index=None, device=None):
    """The mask of `allowed_mask` as a flex_attention mask_mod: (b, h, q_idx, kv_idx) -> bool.

    The function reads torch tensors of the description (on `device`) by global token index, so
    it works on any S and under torch.vmap (create_block_mask, flex_attention's eager path).
    With query_index (key_index), q_idx (kv_idx) is a row of a block call: the token it names is
    query_index[q_idx] (key_index[kv_idx]).
    """
    _check_rule(layer_type, window, chunk_size, chunk_origin)
    torch = _import_torch()

    def tensor(array):
        return torch.as_tensor(np.ascontiguousarray(array), device=device)

    key_valid = tensor(mask.key_valid != 0)
    document = tensor(mask.document)
    document_start = tensor(mask.document_start)
    position = tensor(mask.position)
    left_padding = tensor(mask.left_padding)
    query_tokens = (None if query_index is None
                    else tensor(_token_indices(query_index, mask.seq_len, "query_index")))
    key_tokens = (None if key_index is None
                  else tensor(_token_indices(key_index, mask.seq_len, "key_index")))

    def chunk(offsets):
        return torch.div(offsets, chunk_size, rounding_mode="floor")

    def allowed(b, h, q_idx, kv_idx):
        q = q_idx if query_tokens is None else query_tokens[q_idx]
        k = kv_idx if key_tokens is None else key_tokens[kv_idx]
        result = (k <= q) & key_valid[b, k] & (document[b, q] == document[b, k])
        if layer_type == "sliding":
            result = result & (k > q - window)
        elif layer_type == "chunked":
            if chunk_origin == "position":
                result = result & (chunk(position[b, k]) == chunk(position[b, q]))
            else:
                origin = left_padding[b] if chunk_origin == "row" else document_start[b, q]
                result = result & (chunk(k - origin) == chunk(q - origin))
        return result

    return allowed


# --- the export --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Reference:
    """A layer's float64 reference: out, dq [B, S, H, Dh]; lse [B, H, S]; dk, dv [B, S, Hkv, Dh].
    A fully masked row has out 0 and lse -inf."""

    out: np.ndarray
    lse: np.ndarray
    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray


class AttentionLayer:
    """Layer `index` of a case: its mask rule, inputs and reference.

    The arrays (q, k, v, dout, reference, given_out, given_lse) are read from the export file on
    each access and not kept: hold on to what you read.
    """

    def __init__(self, case, index, layer_type, window, chunk_size, chunk_origin):
        self.case = case
        self.index = index
        self.layer_type = layer_type
        self.window = window
        self.chunk_size = chunk_size
        self.chunk_origin = chunk_origin

    def __repr__(self):
        return (f"AttentionLayer({self.case.name!r}, {self.index}, {self.layer_type!r}, "
                f"window={self.window}, chunk_size={self.chunk_size}, "
                f"chunk_origin={self.chunk_origin!r})")

    @property
    def hdf5_path(self):
        return f"/cases/{self.case.name}/layers/{self.index}"

    def _read(self, *names):
        with h5py.File(self.case.export_path, "r") as file:
            group = file[self.hdf5_path]
            return [group[name][()] for name in names]

    @property
    def q(self):
        """float32 [B, S, H, Dh]"""
        return self._read("q")[0]

    @property
    def k(self):
        """float32 [B, S, Hkv, Dh]"""
        return self._read("k")[0]

    @property
    def v(self):
        """float32 [B, S, Hkv, Dh]"""
        return self._read("v")[0]

    @property
    def dout(self):
        """float32 [B, S, H, Dh]: the gradient of the output, the backward's input."""
        return self._read("dout")[0]

    @property
    def reference(self):
        """The float64 `Reference`."""
        arrays = self._read(*(f"reference/{name}" for name in OUTPUT_NAMES))
        return Reference(*(np.asarray(array, dtype=np.float64) for array in arrays))

    @property
    def given_out(self):
        """float32 [B, S, H, Dh]: the reference's out rounded, what backward_alone and the block
        calls' backward are given."""
        return self._read("reference/out")[0].astype(np.float32)

    @property
    def given_lse(self):
        """float32 [B, H, S]: the reference's lse rounded (-inf stays -inf)."""
        return self._read("reference/lse")[0].astype(np.float32)

    def allowed(self, query_index=None, key_index=None):
        """This layer's mask, dense: numpy bool [B, Sq, Sk] (`allowed_mask`)."""
        return allowed_mask(self.case.mask, self.layer_type, self.window, self.chunk_size,
                            self.chunk_origin, query_index, key_index)

    def mask_mod(self, query_index=None, key_index=None, device=None):
        """This layer's mask as a flex_attention mask_mod (`mask_mod`)."""
        return mask_mod(self.case.mask, self.layer_type, self.window, self.chunk_size,
                        self.chunk_origin, query_index, key_index, device)


class AttentionCase:
    """One attention-level case of an export: sizes, scale, mask, layers and block calls."""

    def __init__(self, export_path, name, attributes, mask, query_blocks, key_blocks,
                 layer_rules):
        self.export_path = export_path
        self.name = name
        self.order = int(attributes["order"])
        self.seed = int(attributes["seed"])
        self.input_seed = int(attributes["input_seed"])
        self.dtype = attributes["dtype"]
        self.batch = int(attributes["batch"])
        self.seq_len = int(attributes["seq_len"])
        self.heads = int(attributes["heads"])
        self.kv_heads = int(attributes["kv_heads"])
        self.head_dim = int(attributes["head_dim"])
        # the float32 1/sqrt(Dh) the kernel is called with, as a Python float (exact)
        self.scale = float(np.float32(attributes["scale"]))
        self.mask = mask
        self.query_blocks = query_blocks  # QUERY_BLOCKS int64 arrays of global token indices
        self.key_blocks = key_blocks      # KEY_BLOCKS of them
        self.layers = [AttentionLayer(self, index, *rule) for index, rule in enumerate(layer_rules)]

    def __repr__(self):
        return (f"AttentionCase({self.name!r}, B={self.batch}, S={self.seq_len}, H={self.heads}, "
                f"Hkv={self.kv_heads}, Dh={self.head_dim}, layers={len(self.layers)})")

    @property
    def query_shape(self):
        """[B, S, H, Dh]: q, out, dq, dout"""
        return (self.batch, self.seq_len, self.heads, self.head_dim)

    @property
    def key_shape(self):
        """[B, S, Hkv, Dh]: k, v, dk, dv"""
        return (self.batch, self.seq_len, self.kv_heads, self.head_dim)

    @property
    def lse_shape(self):
        """[B, H, S]"""
        return (self.batch, self.heads, self.seq_len)

    def block_pairs(self):
        """(i, j, query_index, key_index) of every block call: query block i against key block
        j, both non-empty, in the order i then j."""
        for i, query_index in enumerate(self.query_blocks):
            for j, key_index in enumerate(self.key_blocks):
                if query_index.size and key_index.size:
                    yield i, j, query_index, key_index


@dataclass
class AttentionExport:
    """What `read_attention_export` returns."""

    path: str
    digest: str
    cases: list  # AttentionCase, in the export's order (attribute `order`)
    suite_yaml: object = None  # the suite's text, or None without /source/suite_yaml
    suite_path: object = None  # the suite file's path, or None

    def case(self, name):
        """The case called `name` (KeyError when the export has none)."""
        for case in self.cases:
            if case.name == name:
                return case
        raise KeyError(f"{self.path}: no case {name!r}")


def _attribute(path, holder, name):
    if name not in holder.attrs:
        raise ValueError(f"{path}: {holder.name}: no attribute {name!r} (docs/dump-format.md, "
                         f"the attention-level export)")
    return _decode_attribute(holder.attrs[name])


def read_attention_export(path):
    """Read an attention-level `cpparity export` file (docs/dump-format.md) into an
    `AttentionExport`: every case's attributes, mask and block tokens; the per-layer arrays are
    read when asked for (AttentionLayer). Raises ValueError, naming the file and the HDF5 path,
    on a file that is not version 1 of the format."""
    path = os.fspath(path)
    with h5py.File(path, "r") as file:
        if "format" not in file.attrs:
            raise ValueError(f"{path}: /: no attribute 'format': not an attention-level export "
                             f"(a model-level export is read by cpparity_dump.read_export)")
        format_name = _decode_attribute(file.attrs["format"])
        if format_name != EXPORT_FORMAT:
            raise ValueError(f"{path}: /: format {format_name!r}, expected {EXPORT_FORMAT!r}")
        version = _attribute(path, file, "format_version")
        if version != EXPORT_FORMAT_VERSION:
            raise ValueError(f"{path}: /: format_version {version}; this module reads "
                             f"{EXPORT_FORMAT_VERSION}")
        digest = _attribute(path, file, "digest")
        cases = []
        for name, group in file["cases"].items():
            attributes = {key: _decode_attribute(value) for key, value in group.attrs.items()}
            for required in ("order", "seed", "input_seed", "dtype", "batch", "seq_len", "heads",
                             "kv_heads", "head_dim", "layer_count", "scale"):
                _attribute(path, group, required)
            mask = MaskDescription(**{field: group["mask"][field][()]
                                      for field in MaskDescription.__dataclass_fields__})
            query_blocks = [np.asarray(group[f"blocks/query_{i}"][()], dtype=np.int64)
                            for i in range(QUERY_BLOCKS)]
            key_blocks = [np.asarray(group[f"blocks/key_{j}"][()], dtype=np.int64)
                          for j in range(KEY_BLOCKS)]
            rules = []
            for index in range(int(attributes["layer_count"])):
                layer = group[f"layers/{index}"]
                rules.append((_attribute(path, layer, "layer_type"),
                              int(_attribute(path, layer, "window")),
                              int(_attribute(path, layer, "chunk_size")),
                              _attribute(path, layer, "chunk_origin")))
            cases.append(AttentionCase(path, name, attributes, mask, query_blocks, key_blocks,
                                       rules))
        suite_yaml = suite_path = None
        if "source/suite_yaml" in file:
            suite_yaml = bytes(np.asarray(file["source/suite_yaml"][()], dtype=np.uint8)).decode()
            for holder in (file["source/suite_yaml"], file["source"]):
                if suite_path is None and "path" in holder.attrs:
                    suite_path = _decode_attribute(holder.attrs["path"])
    cases.sort(key=lambda case: case.order)
    return AttentionExport(path=path, digest=digest, cases=cases, suite_yaml=suite_yaml,
                           suite_path=suite_path)


# --- the kernel dump ---------------------------------------------------------------------------

class KernelDumpWriter:
    """Writes a kernel dump, version 1 of docs/dump-format.md, for one export.

    Use it as a context manager (or call close()): every case and layer of the export must be
    written, by write_layer or unsupported, before close(), which then moves the file to `path`.
    Until then it is a temporary file beside `path`, removed when anything fails; an existing
    `path` is never overwritten (FileExistsError). Every argument that breaks the contract
    raises ValueError naming the case and layer.
    """

    def __init__(self, path, export, *, kernel, kernel_version="", framework,
                 framework_version="", deterministic=False, block_calls=False,
                 backward_uses_out_lse=True):
        if not isinstance(export, AttentionExport):
            export = read_attention_export(export)
        for name, text in (("kernel", kernel), ("framework", framework)):
            if not isinstance(text, str) or not text:
                raise ValueError(f"{name} {text!r}: expected a non-empty string")
        for name, text in (("kernel_version", kernel_version),
                           ("framework_version", framework_version)):
            if not isinstance(text, str):
                raise ValueError(f"{name} {text!r}: expected a string")
        self.path = os.fspath(path)
        if os.path.exists(self.path):
            raise FileExistsError(f"{self.path} exists: a kernel dump is never overwritten")
        self.export = export
        self.deterministic = bool(deterministic)
        self.block_calls = bool(block_calls)
        self.backward_uses_out_lse = bool(backward_uses_out_lse)
        self._written = set()  # (case name, layer index)
        folder, base = os.path.split(os.path.abspath(self.path))
        self._temporary = os.path.join(folder, f".{base}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        self._file = _checksummed_file(self._temporary)
        try:
            attrs = self._file.attrs
            # strings as fixed-length bytes, in the checksummed object header (cpparity_dump);
            # str() first: torch.__version__ is a str subclass h5py cannot convert
            attrs["format"] = _text(DUMP_FORMAT)
            attrs["format_version"] = np.int64(DUMP_FORMAT_VERSION)
            attrs["kernel"] = _text(kernel)
            attrs["kernel_version"] = _text(kernel_version)
            attrs["framework"] = _text(framework)
            attrs["framework_version"] = _text(framework_version)
            attrs["export_digest"] = _text(export.digest)
            attrs["deterministic"] = np.int64(self.deterministic)
            attrs["block_calls"] = np.int64(self.block_calls)
            attrs["backward_uses_out_lse"] = np.int64(self.backward_uses_out_lse)
        except BaseException:
            self._discard()
            raise

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.close()
        else:
            self._discard()
        return False

    def _discard(self):
        """Drop the temporary file (after a failure)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if os.path.exists(self._temporary):
            os.unlink(self._temporary)

    def _layer(self, case, layer):
        """The export's (AttentionCase, AttentionLayer) for a case (object or name) and a layer
        (object or index), not written yet."""
        if self._file is None:
            raise ValueError(f"{self.path}: the writer is closed")
        name = case.name if isinstance(case, AttentionCase) else case
        try:
            found = self.export.case(name)
        except KeyError:
            raise ValueError(f"case {name!r} is not a case of the export {self.export.path}") \
                from None
        index = layer.index if isinstance(layer, AttentionLayer) else layer
        if not isinstance(index, (int, np.integer)) or not 0 <= index < len(found.layers):
            raise ValueError(f"case {name!r}: layer {index!r}: the case has layers 0 to "
                             f"{len(found.layers) - 1}")
        if (name, int(index)) in self._written:
            raise ValueError(f"case {name!r} layer {index}: written already")
        return found, found.layers[int(index)]

    def unsupported(self, case, layer, reason):
        """The layer is not claimed (NOT CLAIMED in the judge's report, neither passed nor
        failed), with the reason: a non-empty string."""
        case, layer = self._layer(case, layer)
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"case {case.name!r} layer {layer.index}: unsupported needs a reason "
                             f"(a non-empty string)")
        group = self._file.create_group(layer.hdf5_path)
        group.attrs["unsupported"] = _text(reason)
        self._written.add((case.name, layer.index))

    def write_layer(self, case, layer, out, lse, dq, dk, dv, backward_alone=None, again=None,
                    blocks=None):
        """One claimed layer: the kernel's forward (out, lse) and its backward given that
        forward's out and lse (dq, dk, dv), in the ABI's shapes (module docstring).

        backward_alone: (dq, dk, dv) given layer.given_out and layer.given_lse; exactly when the
        writer has backward_uses_out_lse. again: (out, lse, dq, dk, dv) of a second call; exactly
        when deterministic. blocks: {(i, j): (out, lse, dq, dk, dv)} for every pair of
        case.block_pairs(); exactly when block_calls. Every array is written as float32.
        """
        case, layer = self._layer(case, layer)
        where = f"case {case.name!r} layer {layer.index}"
        promises = (("backward_alone", backward_alone, self.backward_uses_out_lse,
                     "backward_uses_out_lse"),
                    ("again", again, self.deterministic, "deterministic"),
                    ("blocks", blocks, self.block_calls, "block_calls"))
        for name, value, promised, flag in promises:
            if promised and value is None:
                raise ValueError(f"{where}: no {name}, which the writer's {flag}=True promises")
            if not promised and value is not None:
                raise ValueError(f"{where}: {name} given, but the writer was made with "
                                 f"{flag}=False (its root attribute says the dump has none)")
        full = _output_shapes(case, case.seq_len, case.seq_len)
        datasets = {}
        datasets.update(_outputs(where, "", OUTPUT_NAMES, (out, lse, dq, dk, dv), full))
        if backward_alone is not None:
            datasets.update(_outputs(where, "backward_alone/", GRADIENT_NAMES, backward_alone,
                                     full))
        if again is not None:
            datasets.update(_outputs(where, "again/", OUTPUT_NAMES, again, full))
        if blocks is not None:
            datasets.update(_block_outputs(where, case, blocks))
        group = self._file.create_group(layer.hdf5_path)
        for name, array in datasets.items():
            _checked_dataset(group, name, array)
        self._written.add((case.name, layer.index))

    def close(self):
        """Check that every case and layer of the export was written, then move the dump to its
        path. Raises ValueError naming the missing layers (and writes nothing)."""
        if self._file is None:
            return
        missing = [layer.hdf5_path for case in self.export.cases for layer in case.layers
                   if (case.name, layer.index) not in self._written]
        if missing:
            self._discard()
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more"
                                              if len(missing) > 5 else "")
            raise ValueError(f"{self.path}: not written: {len(missing)} layer"
                             f"{'s' if len(missing) != 1 else ''} of the export with neither "
                             f"write_layer nor unsupported: {shown}")
        self._file.close()
        self._file = None
        try:
            # a hard link never replaces an existing file (os.replace would)
            os.link(self._temporary, self.path)
        except FileExistsError:
            os.unlink(self._temporary)
            raise FileExistsError(f"{self.path} appeared while the dump was written: a kernel "
                                  f"dump is never overwritten") from None
        except OSError:  # a file system without hard links: check, then rename
            if os.path.exists(self.path):
                os.unlink(self._temporary)
                raise FileExistsError(f"{self.path} appeared while the dump was written: a "
                                      f"kernel dump is never overwritten") from None
            os.rename(self._temporary, self.path)
            return
        os.unlink(self._temporary)


def _output_shapes(case, query_rows, key_rows):
    """{name: shape} of out, lse, dq, dk, dv for a call of query_rows queries and key_rows keys."""
    query = (case.batch, query_rows, case.heads, case.head_dim)
    key = (case.batch, key_rows, case.kv_heads, case.head_dim)
    return {"out": query, "lse": (case.batch, case.heads, query_rows), "dq": query, "dk": key,
            "dv": key}


def _outputs(where, prefix, names, values, shapes):
    """{prefix + name: float32 array} from a tuple of arrays, each checked against shapes."""
    try:
        values = tuple(values)
    except TypeError:
        raise ValueError(f"{where}: {prefix.rstrip('/') or 'outputs'}: expected a tuple of "
                         f"{', '.join(names)}") from None
    if len(values) != len(names):
        raise ValueError(f"{where}: {prefix.rstrip('/')}: expected {len(names)} arrays "
                         f"({', '.join(names)}), got {len(values)}")
    arrays = {}
    for name, value in zip(names, values):
        what = prefix + name
        if value is None:
            raise ValueError(f"{where}: {what} is None")
        array = _to_numpy(value, floating=True)
        if array.dtype.kind != "f":
            raise ValueError(f"{where}: {what}: expected floating-point values, got dtype "
                             f"{array.dtype}")
        if array.shape != shapes[name]:
            raise ValueError(f"{where}: {what}: shape {list(array.shape)}, expected "
                             f"{list(shapes[name])}")
        arrays[what] = np.ascontiguousarray(array, dtype=np.float32)
    return arrays


def _block_outputs(where, case, blocks):
    """{blocks/<i>_<j>/<name>: float32 array} of every block pair of the case, exactly those."""
    if not isinstance(blocks, dict):
        raise ValueError(f"{where}: blocks: expected a dict {{(i, j): (out, lse, dq, dk, dv)}}")
    pairs = {(i, j): (query_index, key_index)
             for i, j, query_index, key_index in case.block_pairs()}
    extra = sorted(set(blocks) - set(pairs), key=str)
    if extra:
        raise ValueError(f"{where}: blocks {extra[0]!r}: not a block pair of the case (pairs: "
                         f"{sorted(pairs)})")
    arrays = {}
    for (i, j), (query_index, key_index) in pairs.items():
        if (i, j) not in blocks:
            raise ValueError(f"{where}: blocks: no pair ({i}, {j}), which block_calls=True "
                             f"promises (pairs: {sorted(pairs)})")
        shapes = _output_shapes(case, query_index.size, key_index.size)
        arrays.update(_outputs(where, f"blocks/{i}_{j}/", OUTPUT_NAMES, blocks[(i, j)], shapes))
    return arrays
