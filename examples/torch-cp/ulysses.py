"""Ulysses context parallelism over torch.distributed, as DeepSpeed and transformers do it.

Each of the cp ranks holds one contiguous shard of L = Sp / cp tokens of the padded sequence
(cpparity_dump's "contiguous" layout). Everything outside attention is per token and runs on
the shard. Attention needs the whole sequence, so around it an all-to-all trades the sequence
split for a head split: q, k, v go from [B, L, H, Dh] (all heads, my tokens) to
[B, Sp, H/cp, Dh] (every token, my heads); each rank runs ordinary attention with the dense
mask of the global sequence for its heads; a second all-to-all brings the output back to
[B, L, H, Dh]. Key/value heads are repeated to H first (as repeat_kv), so cp must divide H.

The global masks, the loss and the gradient reduction are cp_common.py's.
"""

import torch
import torch.distributed as dist

from model import masked_softmax_attention, repeat_kv


class AllToAll(torch.autograd.Function):
    """Split x into cp pieces along scatter_dim, send piece j to rank j, and concatenate the
    pieces received, in rank order, along gather_dim. The backward is the reverse exchange."""

    @staticmethod
    def forward(ctx, x, scatter_dim, gather_dim):
        ctx.scatter_dim, ctx.gather_dim = scatter_dim, gather_dim
        world = dist.get_world_size()
        send = torch.stack(x.chunk(world, dim=scatter_dim)).contiguous()
        received = torch.empty_like(send)
        dist.all_to_all_single(received, send)
        return torch.cat(received.unbind(0), dim=gather_dim)

    @staticmethod
    def backward(ctx, grad):
        return AllToAll.apply(grad, ctx.gather_dim, ctx.scatter_dim), None, None


SEQUENCE_DIM, HEAD_DIM = 1, 2


def sequence_to_heads(x):
    """[B, L, H, Dh] on each rank (its tokens) -> [B, Sp, H/cp, Dh] (its heads)."""
    return AllToAll.apply(x, HEAD_DIM, SEQUENCE_DIM)


def heads_to_sequence(x):
    """[B, Sp, H/cp, Dh] (this rank's heads) -> [B, L, H, Dh] (this rank's tokens)."""
    return AllToAll.apply(x, SEQUENCE_DIM, HEAD_DIM)


class UlyssesAttention:
    """The model's attention function for one step of Ulysses CP.

    masks: the global {layer type: allowed [B, Sp, Sp]} (cp_common.global_masks); the ranks
    must hold contiguous shards in rank order.
    """

    def __init__(self, config, masks):
        world = dist.get_world_size()
        heads = config.num_attention_heads
        if heads % world != 0:
            raise ValueError(f"Ulysses needs cp to divide num_attention_heads: {heads} heads "
                             f"over cp {world}")
        self.kv_groups = heads // config.num_key_value_heads
        self.masks = masks

    def __call__(self, q, k, v, layer_type):
        q = sequence_to_heads(q)
        k = sequence_to_heads(repeat_kv(k, self.kv_groups))
        v = sequence_to_heads(repeat_kv(v, self.kv_groups))
        out = masked_softmax_attention(q, k, v, self.masks[layer_type])
        return heads_to_sequence(out)
