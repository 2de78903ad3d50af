"""A plain PyTorch float32 attention kernel, judged by `cpparity judge` through a kernel dump.

    python3 torch_kernel.py EXPORT.h5 -o DUMP.h5 [--wrong NAME]

The kernel has an explicit forward and an explicit backward (no autograd), as a fused kernel
has, so the dump claims everything the format can judge: backward_uses_out_lse (the backward
takes out and lse, and is also called with the reference's: backward_alone), deterministic (a
second call, `again`, bit for bit) and block calls (ring attention's: each query block against
each key block, blocks). It runs with Debian's torch 1.13 (no scaled_dot_product_attention) and
with torch 2. The mask is cpparity_kernel's dense one (layer.allowed): the cases are small.

Forward, with S the scaled scores scale * q k^T over the allowed keys:
    lse = log sum_k exp(S)   (natural log; -inf for a row with no allowed key)
    P = exp(S - lse),  out = P V   (0 for a row with no allowed key, never NaN)
Backward, given dout, q, k, v, out and lse:
    dV = P^T dout,  dP = dout V^T,  D = rowsum(dout * out),  dS = P * (dP - D),
    dQ = scale * dS K,  dK = scale * dS^T Q
with the gradients of a key/value head summed over the query heads that read it (GQA).

--wrong plants one bug (README.md lists the verdict each gets).
"""

import math

import numpy as np
import torch

from kernel_example import (cpparity_kernel, expand_kv_heads, layer_with, parse_arguments,
                            sum_kv_heads)

WRONG = ("window-off-by-one", "lse-log2", "backward-no-rowsum", "chunk-origin-local",
         "masked-row-finite-lse", "not-deterministic")
NEG_INF = float("-inf")


def scores(q, k, scale):
    """scale * q k^T: [B, H, Sq, Sk] from q [B, Sq, H, Dh] and k [B, Sk, Hkv, Dh]."""
    return torch.einsum("bqhd,bkhd->bhqk", q, expand_kv_heads(k, q.shape[2])) * scale


def probabilities(q, k, allowed, lse, scale):
    """P = exp(S - lse) on the allowed keys, 0 elsewhere: [B, H, Sq, Sk]."""
    disallowed = ~allowed[:, None]
    # a row with no allowed key has lse -inf, and exp(-inf - -inf) is NaN: masked to 0 below
    return torch.exp(scores(q, k, scale) - lse[..., None]).masked_fill(disallowed, 0.0)


def forward(q, k, v, allowed, scale, wrong):
    """out [B, Sq, H, Dh] and lse [B, H, Sq] over the allowed keys (allowed [B, Sq, Sk])."""
    masked = scores(q, k, scale).masked_fill(~allowed[:, None], NEG_INF)
    lse = torch.logsumexp(masked, dim=-1)  # -inf where every score is -inf
    out = torch.einsum("bhqk,bkhd->bqhd", probabilities(q, k, allowed, lse, scale),
                       expand_kv_heads(v, q.shape[2]))
    if wrong == "lse-log2":
        lse = lse / math.log(2.0)
    if wrong == "masked-row-finite-lse":
        lse = lse.masked_fill(torch.isneginf(lse), -1e30)
    return out, lse


def backward(dout, q, k, v, out, lse, allowed, scale, wrong):
    """dq [B, Sq, H, Dh], dk and dv [B, Sk, Hkv, Dh] of sum(dout * out), given out and lse."""
    heads, kv_heads = q.shape[2], k.shape[2]
    p = probabilities(q, k, allowed, lse, scale)
    dv = torch.einsum("bhqk,bqhd->bkhd", p, dout)
    dp = torch.einsum("bqhd,bkhd->bhqk", dout, expand_kv_heads(v, heads))
    rowsum = (dout * out).sum(dim=-1).permute(0, 2, 1)  # D: [B, H, Sq]
    if wrong == "backward-no-rowsum":
        rowsum = torch.zeros_like(rowsum)
    ds = p * (dp - rowsum[..., None])
    dq = scale * torch.einsum("bhqk,bkhd->bqhd", ds, expand_kv_heads(k, heads))
    dk = scale * torch.einsum("bhqk,bqhd->bkhd", ds, q)
    return dq, sum_kv_heads(dk, kv_heads), sum_kv_heads(dv, kv_heads)


def kernel_mask(layer, wrong, query_index=None, key_index=None):
    """The mask the kernel computes, bool [B, Sq, Sk]: the layer's, or a planted bug's."""
    if wrong == "window-off-by-one" and layer.layer_type == "sliding":
        # k >= q - window: one key more than the window
        return layer_with(layer, window=layer.window + 1).allowed(query_index, key_index)
    if (wrong == "chunk-origin-local" and query_index is not None
            and layer.layer_type == "chunked" and layer.chunk_origin != "position"):
        # chunks counted from the block's first query token, not from the row's left padding
        # or the document's start: right on whole sequences, wrong on ring attention's blocks
        origin = int(query_index[0])
        query_chunk = (query_index[:, None] - origin) // layer.chunk_size
        key_chunk = (key_index[None, :] - origin) // layer.chunk_size
        unchunked = layer_with(layer, layer_type="full").allowed(query_index, key_index)
        return unchunked & (query_chunk == key_chunk)[None]
    return layer.allowed(query_index, key_index)


def last_bit_flipped(tensor):
    """A copy of the tensor whose largest element is one ulp larger (--wrong not-deterministic)."""
    values = tensor.numpy().copy()
    flat = values.reshape(-1)
    index = int(np.argmax(np.abs(flat)))
    flat[index] = np.nextafter(flat[index], np.float32(np.inf))
    return torch.from_numpy(values)


def run_layer(case, layer, wrong):
    """write_layer's arguments for one layer: every call the dump claims."""
    q, k, v, dout = (torch.from_numpy(array) for array in (layer.q, layer.k, layer.v,
                                                             layer.dout))
    given_out = torch.from_numpy(layer.given_out)
    given_lse = torch.from_numpy(layer.given_lse)
    scale = case.scale
    allowed = torch.from_numpy(kernel_mask(layer, wrong))

    def call():
        out, lse = forward(q, k, v, allowed, scale, wrong)
        return (out, lse) + backward(dout, q, k, v, out, lse, allowed, scale, wrong)

    first = call()
    again = call()
    if wrong == "not-deterministic":
        again = again[:2] + (last_bit_flipped(again[2]),) + again[3:]
    backward_alone = backward(dout, q, k, v, given_out, given_lse, allowed, scale, wrong)
    blocks = {}
    for i, j, query_index, key_index in case.block_pairs():
        block_allowed = torch.from_numpy(kernel_mask(layer, wrong, query_index, key_index))
        rows, keys = torch.from_numpy(query_index), torch.from_numpy(key_index)
        block_q, block_dout = q[:, rows], dout[:, rows]
        block_k, block_v = k[:, keys], v[:, keys]
        out, lse = forward(block_q, block_k, block_v, block_allowed, scale, wrong)
        # the block's share of the gradients, given the merged out and lse of its query rows
        gradients = backward(block_dout, block_q, block_k, block_v, given_out[:, rows],
                             given_lse[:, :, rows], block_allowed, scale, wrong)
        blocks[(i, j)] = (out, lse) + gradients
    return dict(zip(("out", "lse", "dq", "dk", "dv"), first), backward_alone=backward_alone,
                again=again, blocks=blocks)


def main():
    args = parse_arguments(__doc__.splitlines()[0], WRONG)
    export = cpparity_kernel.read_attention_export(args.export)
    kernel = "torch-explicit" + (f"-wrong-{args.wrong}" if args.wrong else "")
    with cpparity_kernel.KernelDumpWriter(
            args.out, export, kernel=kernel, kernel_version="1", framework="torch",
            framework_version=str(torch.__version__), deterministic=True, block_calls=True,
            backward_uses_out_lse=True) as dump:
        for case in export.cases:
            for layer in case.layers:
                dump.write_layer(case, layer, **run_layer(case, layer, args.wrong))
    print(f"wrote {args.out}: {kernel}, {len(export.cases)} cases")


if __name__ == "__main__":
    main()
