"""Ring attention over torch.distributed, with the zigzag layout (Megatron, TransformerEngine).

The padded sequence is cut into 2·cp chunks; rank r holds chunks r and 2·cp−1−r, so every rank
has about the same share of the causal work. Queries stay put. Key/value blocks travel around
the ring (rank r sends to r+1 and receives from r−1, isend/irecv): at step i rank r attends its
queries to the block of rank r−i, with the slice of the global mask for those two sets of
positions, and merges the partial output into its running output by log-sum-exp. The backward
sends the blocks around again, together with their dK and dV: each rank adds what its queries
contribute, and after cp steps every block is back at its owner with its full gradient. Key/value
heads are repeated to H first (as repeat_kv), which keeps the kernel plain.
"""

import math

import torch
import torch.distributed as dist

from model import repeat_kv


def ring_exchange(tensor):
    """Send `tensor` to the next rank and return the one the previous rank sent."""
    world, rank = dist.get_world_size(), dist.get_rank()
    if world == 1:
        return tensor
    received = torch.empty_like(tensor)
    requests = [dist.isend(tensor.contiguous(), (rank + 1) % world),
                dist.irecv(received, (rank - 1) % world)]
    for request in requests:
        request.wait()
    return received


def finite_or_zero(lse):
    """The log-sum-exp with −inf (a row that sees no key) replaced by 0, safe to subtract."""
    return torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)


def block_attention(q, k, v, allowed):
    """q, k, v [B, H, L, Dh], allowed [B, Lq, Lk] -> (out normalised in the block, lse [B, H, Lq]).

    A row with no allowed key in this block has lse −inf and out 0.
    """
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed[:, None], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - finite_or_zero(lse)[..., None])
    return torch.matmul(probs, v), lse


def merge(out, lse, block_out, block_lse, max_only=False):
    """Combine two partial attention results by their log-sum-exp.

    max_only plants a bug (run.py --wrong lse-merge-max-only): the merged log-sum-exp is the
    larger of the two, as if the other block's probability mass did not exist.
    """
    new_lse = torch.maximum(lse, block_lse) if max_only else torch.logaddexp(lse, block_lse)
    safe = finite_or_zero(new_lse)[..., None]
    out = out * torch.exp(lse[..., None] - safe) + block_out * torch.exp(block_lse[..., None] - safe)
    return out, new_lse


class RingAttentionFunction(torch.autograd.Function):
    """q, k, v [B, H, L, Dh] (this rank's positions) -> attention output [B, H, L, Dh].

    block_masks[s] [B, L, L_s]: which of rank s's keys each of this rank's queries may see;
    max_only: merge with merge(max_only=True), a planted bug.
    """

    @staticmethod
    def forward(ctx, q, k, v, block_masks, max_only):
        world, rank = dist.get_world_size(), dist.get_rank()
        out = torch.zeros_like(q)
        lse = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype)
        key_value = torch.stack([k, v])
        for step in range(world):
            source = (rank - step) % world
            block_out, block_lse = block_attention(q, key_value[0], key_value[1],
                                                   block_masks[source])
            out, lse = merge(out, lse, block_out, block_lse, max_only)
            if step + 1 < world:
                key_value = ring_exchange(key_value)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.block_masks = block_masks
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        world, rank = dist.get_world_size(), dist.get_rank()
        scale = 1.0 / math.sqrt(q.shape[-1])
        delta = (grad_out * out).sum(dim=-1, keepdim=True)
        safe_lse = finite_or_zero(lse)[..., None]
        grad_q = torch.zeros_like(q)
        # the block, and the gradient of its keys and values accumulated so far, travel together
        travelling = torch.stack([k, v, torch.zeros_like(k), torch.zeros_like(v)])
        for step in range(world):
            source = (rank - step) % world
            block_k, block_v, grad_k, grad_v = travelling
            scores = torch.matmul(q, block_k.transpose(-1, -2)) * scale
            scores = scores.masked_fill(~ctx.block_masks[source][:, None], float("-inf"))
            probs = torch.exp(scores - safe_lse)
            grad_v = grad_v + torch.matmul(probs.transpose(-1, -2), grad_out)
            grad_scores = probs * (torch.matmul(grad_out, block_v.transpose(-1, -2)) - delta)
            grad_q = grad_q + torch.matmul(grad_scores, block_k) * scale
            grad_k = grad_k + torch.matmul(grad_scores.transpose(-1, -2), q) * scale
            travelling = ring_exchange(torch.stack([block_k, block_v, grad_k, grad_v]))
        return grad_q, travelling[2], travelling[3], None, None


class RingAttention:
    """The model's attention function for one step of ring attention.

    token_indices: the positions of every rank ([cp] int64 tensors, rank order); masks: the
    global {layer type: allowed [B, Sp, Sp]} (cp_common.global_masks); lse_merge_max_only plants
    run.py's --wrong lse-merge-max-only.
    """

    def __init__(self, config, token_indices, masks, lse_merge_max_only=False):
        mine = token_indices[dist.get_rank()]
        self.max_only = lse_merge_max_only
        self.kv_groups = config.num_attention_heads // config.num_key_value_heads
        self.block_masks = {layer_type: [allowed[:, mine][:, :, theirs]
                                         for theirs in token_indices]
                            for layer_type, allowed in masks.items()}

    def __call__(self, q, k, v, layer_type):
        q, k, v = (t.transpose(1, 2) for t in (q, repeat_kv(k, self.kv_groups),
                                                repeat_kv(v, self.kv_groups)))
        out = RingAttentionFunction.apply(q, k, v, self.block_masks[layer_type], self.max_only)
        return out.transpose(1, 2)
