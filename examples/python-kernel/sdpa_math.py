"""PyTorch 2's scaled_dot_product_attention (math backend), judged by `cpparity judge`.

    python sdpa_math.py EXPORT.h5 -o DUMP.h5 [--wrong window-off-by-one] [--device cuda]
                                                                              (PyTorch 2 only)

torch.nn.functional.scaled_dot_product_attention under
torch.nn.attention.sdpa_kernel(SDPBackend.MATH), with the layer's dense boolean mask
(cpparity_kernel's layer.allowed(), [B, 1, S, S]: True = attend) and GQA by enable_gqa. Its
backward is autograd's, which recomputes the forward: the dump says backward_uses_out_lse=False,
and the gradients of the kernel's own forward stand for the backward given any out and lse. No
block calls, not declared deterministic.

What the wrapper adds, the user's job with SDPA:
  - lse: SDPA returns none. The wrapper computes it from the same masked scores
    (scale * q k^T, -inf on disallowed keys) with torch.logsumexp: natural log, -inf for a row
    with no allowed key.
  - fully masked rows: the math backend on torch >= 2.5 gives them out 0 and zero gradients
    (its softmax of a row of -inf is 0, not NaN; checked on 2.15), which is the contract, so the
    wrapper leaves SDPA's out as it is. Earlier torch gave NaN there, which the judge reports
    as non-finite elements; a wrapper for those versions must zero such rows itself, and keep
    the NaN out of the backward too (for example by letting a fully masked row attend one key
    and multiplying its output by 0).

--wrong window-off-by-one builds the mask with one key more than the window on sliding layers
(k >= q - window), as a hand-made sliding mask easily does.
"""

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernel_example import expand_kv_heads, layer_with, parse_arguments, write_autograd_dump

WRONG = ("window-off-by-one",)


def kernel_mask(layer, wrong):
    """The dense mask given to SDPA, bool [B, S, S]: the layer's, or the planted bug's."""
    if wrong == "window-off-by-one" and layer.layer_type == "sliding":
        return layer_with(layer, window=layer.window + 1).allowed()
    return layer.allowed()


def log_sum_exp(q, k, allowed, scale):
    """lse [B, H, S] (natural log) of the masked scaled scores; q [B, S, H, Dh], k [B, S, Hkv,
    Dh], allowed [B, S, S]."""
    scores = torch.einsum("bqhd,bkhd->bhqk", q, expand_kv_heads(k, q.shape[2])) * scale
    return torch.logsumexp(scores.masked_fill(~allowed[:, None], float("-inf")), dim=-1)


def run_layer(case, layer, wrong, device):
    """out, lse, dq, dk, dv of SDPA's forward and autograd's backward on one layer, on device."""
    q, k, v, dout = (torch.from_numpy(array).to(device) for array in (layer.q, layer.k, layer.v,
                                                                        layer.dout))
    allowed = torch.from_numpy(kernel_mask(layer, wrong)).to(device)
    # SDPA takes [B, H, S, Dh]; the dump's layout is [B, S, H, Dh]
    leaves = [x.transpose(1, 2).detach().requires_grad_(True) for x in (q, k, v)]
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(*leaves, attn_mask=allowed[:, None],
                                             scale=case.scale, enable_gqa=True)
    out.backward(dout.transpose(1, 2))
    with torch.no_grad():
        lse = log_sum_exp(q, k, allowed, case.scale)
    dq, dk, dv = (leaf.grad.transpose(1, 2).cpu() for leaf in leaves)
    return out.detach().transpose(1, 2).cpu(), lse.cpu(), dq, dk, dv


def main():
    args = parse_arguments(__doc__.splitlines()[0], WRONG)
    write_autograd_dump(args, "sdpa-math" + ("-cuda" if args.device == "cuda" else ""),
                        lambda case, layer: run_layer(case, layer, args.wrong, args.device))


if __name__ == "__main__":
    main()
