"""Call a C kernel plugin (include/cpparity/kernel.h) from Python on an attention-level export
and write its kernel dump (docs/dump-format.md, "The kernel dump"), with h5py alone.

The test tests/judge/check_kernel_dump_equals_plugin.sh judges this dump with `cpparity judge`
and the same plugin with `cpparity run --kernel`, and requires the same outcome and the same
error of every tensor of every case: the dump route and the plugin route are one judgement.
This writer is independent of python/cpparity_kernel.py's on purpose (the format, not one
implementation of it, is the contract).

    python3 plugin_kernel_dump.py PLUGIN.so EXPORT.h5 DUMP.h5
"""

import ctypes
import sys

import h5py
import numpy as np

CAPABILITY_DETERMINISTIC = 1 << 7
# what a layer's type needs (kernel.h CPPARITY_KERNEL_SUPPORTS_*, named as kernel_support.c names
# them): (layer_type, chunk_origin or None) -> (bit, name). The plugins judged here declare every
# other capability, so the layer's type is all that can be missing.
LAYER_NEEDS = {(1, None): (1 << 3, "sliding windows"), (2, 0): (1 << 4, "chunks from the row start"),
               (2, 1): (1 << 5, "chunks from each document"),
               (2, 2): (1 << 9, "chunks counted in positions")}
F32 = ctypes.POINTER(ctypes.c_float)
I64 = ctypes.POINTER(ctypes.c_int64)
FORWARD = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, F32, ctypes.c_void_p,
                           ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.c_float, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t)
BACKWARD = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_void_p, ctypes.c_void_p, F32, ctypes.c_void_p,
                            ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p, ctypes.c_char_p,
                            ctypes.c_size_t)
SUPPORTS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_char_p, ctypes.c_size_t)
FORWARD_BLOCK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, F32,
                                 ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_float, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_size_t)
BACKWARD_BLOCK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                  ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                  ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                  ctypes.c_void_p, F32, ctypes.c_void_p, ctypes.c_void_p,
                                  ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p,
                                  ctypes.c_char_p, ctypes.c_size_t)


class Kernel(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_uint32), ("struct_size", ctypes.c_uint32),
                ("name", ctypes.c_char_p), ("version", ctypes.c_char_p),
                ("device", ctypes.c_int32), ("dtype", ctypes.c_int32),
                ("deterministic", ctypes.c_int32), ("context", ctypes.c_void_p),
                ("forward", FORWARD), ("backward", BACKWARD),
                ("capabilities", ctypes.c_uint32), ("head_dim_count", ctypes.c_int32),
                ("head_dims", ctypes.c_void_p), ("supports", ctypes.c_void_p),
                ("workspace_bytes", ctypes.c_void_p), ("forward_block", ctypes.c_void_p),
                ("backward_block", ctypes.c_void_p)]


class Mask(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int64), ("seq_len", ctypes.c_int64),
                ("layer_type", ctypes.c_int32), ("chunk_origin", ctypes.c_int32),
                ("window", ctypes.c_int64), ("chunk_size", ctypes.c_int64),
                ("document", I64), ("document_start", I64),
                ("key_valid", ctypes.POINTER(ctypes.c_int8)), ("left_padding", I64),
                ("position", I64)]


class Dims(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64)
                for name in ("batch", "seq_len", "heads", "kv_heads", "head_dim")]


class Block(ctypes.Structure):
    _fields_ = [("query_len", ctypes.c_int64), ("key_len", ctypes.c_int64),
                ("query_index", I64), ("key_index", I64)]


LAYER_TYPES = {"full": 0, "sliding": 1, "chunked": 2}
CHUNK_ORIGINS = {"row": 0, "document": 1, "position": 2}


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def poisoned(shape):
    """An output filled with NaN, as cpparity fills a plugin's outputs before each call
    (distributed/kernels/kernel_call.h): an element the kernel never writes stays NaN."""
    return np.full(shape, np.nan, np.float32)


def pointer(array):
    return array.ctypes.data_as(ctypes.c_void_p)


def load(path):
    library = ctypes.CDLL(path)
    entry = library.cpparity_kernel_plugin
    entry.restype = ctypes.POINTER(ctypes.POINTER(Kernel))
    entry.argtypes = [ctypes.c_uint32, ctypes.POINTER(ctypes.c_int32)]
    count = ctypes.c_int32(0)
    kernels = entry(3, ctypes.byref(count))
    if count.value < 1:
        sys.exit(f"{path}: no ABI 3 kernel")
    return library, kernels[0].contents


def check(result, error, what):
    if result != 0:
        raise RuntimeError(f"{what}: {error.value.decode()}")


def main():
    plugin_path, export_path, dump_path = sys.argv[1:4]
    library, kernel = load(plugin_path)
    supports = SUPPORTS(kernel.supports) if kernel.supports else None
    has_blocks = bool(kernel.forward_block) and bool(kernel.backward_block)
    forward_block = FORWARD_BLOCK(kernel.forward_block) if has_blocks else None
    backward_block = BACKWARD_BLOCK(kernel.backward_block) if has_blocks else None
    deterministic = bool(kernel.capabilities & CAPABILITY_DETERMINISTIC)
    error = ctypes.create_string_buffer(512)
    with h5py.File(export_path, "r") as export, \
            h5py.File(dump_path, "x", libver=("v110", "v110")) as dump:
        for name, value in (("format", "cpparity-kernel-dump"), ("kernel", text(kernel.name)),
                            ("kernel_version", text(kernel.version or b"")),
                            ("framework", "ctypes"), ("framework_version", sys.version.split()[0]),
                            ("export_digest", text(export.attrs["digest"]))):
            dump.attrs[name] = np.bytes_(value)
        for name, value in (("format_version", 1), ("deterministic", int(deterministic)),
                            ("block_calls", int(has_blocks)), ("backward_uses_out_lse", 1)):
            dump.attrs[name] = np.int64(value)
        for case_name, case in export["cases"].items():
            a = case.attrs
            dims = Dims(*(int(a[k]) for k in ("batch", "seq_len", "heads", "kv_heads",
                                              "head_dim")))
            scale = ctypes.c_float(float(a["scale"]))
            facts = {k: np.ascontiguousarray(case["mask"][k][...])
                     for k in ("document", "document_start", "key_valid", "left_padding",
                               "position")}
            blocks = case["blocks"]
            for layer_name, layer in case["layers"].items():
                group = dump.create_group(f"cases/{case_name}/layers/{layer_name}")
                origin = CHUNK_ORIGINS[text(layer.attrs["chunk_origin"])]
                layer_type = LAYER_TYPES[text(layer.attrs["layer_type"])]
                mask = Mask(dims.batch, dims.seq_len, layer_type, origin,
                            int(layer.attrs["window"]), int(layer.attrs["chunk_size"]),
                            facts["document"].ctypes.data_as(I64),
                            facts["document_start"].ctypes.data_as(I64),
                            facts["key_valid"].ctypes.data_as(ctypes.POINTER(ctypes.c_int8)),
                            facts["left_padding"].ctypes.data_as(I64),
                            facts["position"].ctypes.data_as(I64))
                need = LAYER_NEEDS.get((layer_type, origin if layer_type == 2 else None))
                if need is not None and not kernel.capabilities & need[0]:
                    group.attrs["unsupported"] = np.bytes_(
                        f"needs {need[1]}, which {text(kernel.name)} does not declare")
                    continue
                if supports is not None and not supports(kernel.context, ctypes.byref(mask),
                                                         ctypes.byref(dims), error, 512):
                    group.attrs["unsupported"] = np.bytes_(error.value.decode() or "unsupported")
                    continue
                q, k, v, dout = (np.ascontiguousarray(layer[t][...]) for t in ("q", "k", "v",
                                                                                 "dout"))
                given_out = layer["reference/out"][...].astype(np.float32)
                given_lse = layer["reference/lse"][...].astype(np.float32)

                def call(out_given=None, lse_given=None):
                    out = poisoned(q.shape)
                    lse = poisoned((dims.batch, dims.heads, dims.seq_len))
                    check(kernel.forward(kernel.context, pointer(out), lse.ctypes.data_as(F32),
                                         pointer(q), pointer(k), pointer(v), ctypes.byref(mask),
                                         ctypes.byref(dims), scale, None, error, 512),
                          error, "forward")
                    use_out = out if out_given is None else out_given
                    use_lse = lse if lse_given is None else lse_given
                    grads = [poisoned(q.shape), poisoned(k.shape), poisoned(v.shape)]
                    check(kernel.backward(kernel.context, *(pointer(g) for g in grads),
                                          pointer(dout), pointer(q), pointer(k), pointer(v),
                                          pointer(use_out), use_lse.ctypes.data_as(F32),
                                          ctypes.byref(mask), ctypes.byref(dims), scale, None,
                                          error, 512), error, "backward")
                    return [out, lse] + grads

                for t, values in zip(("out", "lse", "dq", "dk", "dv"), call()):
                    group.create_dataset(t, data=values)
                for t, values in zip(("dq", "dk", "dv"), call(given_out, given_lse)[2:]):
                    group.create_dataset("backward_alone/" + t, data=values)
                if deterministic:
                    for t, values in zip(("out", "lse", "dq", "dk", "dv"), call()):
                        group.create_dataset("again/" + t, data=values)
                for i in range(2):
                    query_index = np.ascontiguousarray(blocks[f"query_{i}"][...])
                    for j in range(3):
                        key_index = np.ascontiguousarray(blocks[f"key_{j}"][...])
                        if not has_blocks or len(query_index) == 0 or len(key_index) == 0:
                            continue
                        block = Block(len(query_index), len(key_index),
                                      query_index.ctypes.data_as(I64),
                                      key_index.ctypes.data_as(I64))
                        bq, bdout, bgo = (np.ascontiguousarray(x[:, query_index])
                                          for x in (q, dout, given_out))
                        bk, bv = (np.ascontiguousarray(x[:, key_index]) for x in (k, v))
                        bgl = np.ascontiguousarray(given_lse[:, :, query_index])
                        out = poisoned(bq.shape)
                        lse = poisoned((dims.batch, dims.heads, len(query_index)))
                        check(forward_block(kernel.context, pointer(out), lse.ctypes.data_as(F32),
                                            pointer(bq), pointer(bk), pointer(bv),
                                            ctypes.byref(mask), ctypes.byref(dims),
                                            ctypes.byref(block), scale, None, error, 512),
                              error, "forward_block")
                        grads = [poisoned(bq.shape), poisoned(bk.shape), poisoned(bv.shape)]
                        check(backward_block(kernel.context, *(pointer(g) for g in grads),
                                             pointer(bdout), pointer(bq), pointer(bk),
                                             pointer(bv), pointer(bgo), bgl.ctypes.data_as(F32),
                                             ctypes.byref(mask), ctypes.byref(dims),
                                             ctypes.byref(block), scale, None, error, 512),
                              error, "backward_block")
                        for t, values in zip(("out", "lse", "dq", "dk", "dv"),
                                             [out, lse] + grads):
                            group.create_dataset(f"blocks/{i}_{j}/{t}", data=values)
    del library


if __name__ == "__main__":
    main()
