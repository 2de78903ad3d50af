"""PyTorch 2's flex_attention, judged by `cpparity judge`.

    python flex_attention.py EXPORT.h5 -o DUMP.h5 [--wrong chunk-origin-local | lse-log2]
                             [--device cuda]

torch.nn.attention.flex_attention.flex_attention, uncompiled, with the layer's mask as a
mask_mod on global token indices (cpparity_kernel's layer.mask_mod(): key padding, documents,
the causal term, sliding windows, chunks from the case's chunk origin; nothing S x S is built
by us) turned into a BlockMask by create_block_mask (uncompiled too), GQA by enable_gqa, and
the log-sum-exp flex returns. Its backward is autograd's, which recomputes the forward:
backward_uses_out_lse=False, no block calls, not declared deterministic.

What flex gives, checked on torch 2.15 on the CPU against the export's float64 reference:
  - lse: flex's kernels keep the log-sum-exp in base 2 inside, and flex_attention() converts
    it (times ln 2) before returning it, so the lse it returns is the natural log the dump
    wants: written as it is.
  - a fully masked row (no allowed key): out 0 and lse -inf, its gradients 0, no NaN, as the
    contract says: written as it is.

On CUDA (--device cuda) flex_attention is compiled (torch.compile: the Triton kernels users run,
forward and backward) and the block mask is built on the device; a layer the compiled kernel
refuses (a head dim it has no kernel for, say) is written `unsupported` with torch's message, so
the judge reports it NOT CLAIMED rather than the run stopping. Untested here: no GPU in CI; the
device check (scripts/device-check.sh, row python-kernel-flex-cuda) runs it where one is lent.

Workaround for the CPU (it changes no maths): flex_attention refuses a backward on the CPU
before it starts (torch/nn/attention/flex_attention.py, _validate_device: "FlexAttention does
not support backward on CPU"; the CPU has no fused flex kernel with a backward). Uncompiled,
flex_attention runs torch's eager implementation and its autograd, which has a backward on
every device; `allow_cpu_backward` replaces that check with one without the CPU clause (as
examples/torch-cp/torch_flex_context_parallel.py does).

Planted bugs (--wrong):
  - chunk-origin-local: the mask_mod counts chunks from index 0 of the row, q_idx // C ==
    kv_idx // C, as flex's documentation example of chunked attention does, instead of from
    the row's left padding, each document's start or the positions (the case's chunk_origin).
    Right on chunked layers of unpadded one-document rows, wrong on the others.
  - lse-log2: the lse written in base 2 (divided by ln 2), as flex's kernels hold it inside.
"""

import math

import torch
import torch.nn.attention.flex_attention as flex

from kernel_example import layer_with, parse_arguments, write_autograd_dump

WRONG = ("chunk-origin-local", "lse-log2")
LN2 = math.log(2.0)


def validate_device_allowing_cpu_backward(query, key, value):
    """flex_attention's _validate_device without its clause refusing a backward on the CPU."""
    if query.device.type == "mps" and (
            query.requires_grad or key.requires_grad or value.requires_grad):
        raise NotImplementedError("FlexAttention does not support backward on MPS.")
    if query.device.type not in {"cuda", "cpu", "xpu", "hpu", "mps"}:
        raise ValueError(f"FlexAttention is not supported on {query.device.type}")


def allow_cpu_backward():
    """flex_attention's backward on the CPU (module docstring)."""
    flex._validate_device = validate_device_allowing_cpu_backward


def kernel_mask_mod(layer, wrong, device):
    """The mask_mod given to create_block_mask: the layer's, or the planted bug's."""
    if wrong == "chunk-origin-local" and layer.layer_type == "chunked":
        unchunked = layer_with(layer, layer_type="full").mask_mod(device=device)
        chunk_size = layer.chunk_size

        def chunks_from_index_zero(b, h, q_idx, kv_idx):
            return unchunked(b, h, q_idx, kv_idx) & (q_idx // chunk_size == kv_idx // chunk_size)

        return chunks_from_index_zero
    return layer.mask_mod(device=device)


def attention_with_lse(attend, q, k, v, block_mask, scale):
    """attend's (flex_attention's) out [B, H, S, Dh] and lse [B, H, S] (natural log)."""
    if hasattr(flex, "AuxRequest"):  # torch >= 2.9; return_lse is deprecated there
        out, aux = attend(q, k, v, block_mask=block_mask, scale=scale, enable_gqa=True,
                          return_aux=flex.AuxRequest(lse=True))
        return out, aux.lse
    return attend(q, k, v, block_mask=block_mask, scale=scale, enable_gqa=True, return_lse=True)


def run_layer(attend, case, layer, wrong, device):
    """out, lse, dq, dk, dv of flex_attention's forward and autograd's backward on one layer."""
    q, k, v, dout = (torch.from_numpy(array).to(device) for array in (layer.q, layer.k, layer.v,
                                                                        layer.dout))
    block_mask = flex.create_block_mask(kernel_mask_mod(layer, wrong, device), case.batch, None,
                                        case.seq_len, case.seq_len, device=device)
    # flex takes [B, H, S, Dh]; the dump's layout is [B, S, H, Dh]
    leaves = [x.transpose(1, 2).contiguous().requires_grad_(True) for x in (q, k, v)]
    out, lse = attention_with_lse(attend, *leaves, block_mask, case.scale)
    out.backward(dout.transpose(1, 2))
    lse = lse.detach()
    if wrong == "lse-log2":
        lse = lse / LN2
    dq, dk, dv = (leaf.grad.transpose(1, 2).cpu() for leaf in leaves)
    return out.detach().transpose(1, 2).cpu(), lse.cpu(), dq, dk, dv


def compiled_flex_attention():
    """flex_attention compiled for CUDA, with room to compile every shape of an export (past
    dynamo's default limit of 8 it would fall back to the eager implementation silently)."""
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = 1024
    return torch.compile(flex.flex_attention, dynamic=False)


def main():
    args = parse_arguments(__doc__.splitlines()[0], WRONG)
    on_gpu = args.device == "cuda"
    if not on_gpu:
        allow_cpu_backward()
    attend = compiled_flex_attention() if on_gpu else flex.flex_attention
    # the eager CPU path runs every layer: an error there is a bug, never a refusal
    write_autograd_dump(args, "flex_attention-cuda-compiled" if on_gpu else "flex_attention",
                        lambda case, layer: run_layer(attend, case, layer, args.wrong,
                                                      args.device),
                        refused=(RuntimeError, ValueError, NotImplementedError) if on_gpu else ())


if __name__ == "__main__":
    main()
