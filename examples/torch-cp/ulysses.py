"""Ulysses context parallelism over torch.distributed, as DeepSpeed and transformers do it.

Each of the cp ranks holds one contiguous shard of L = Sp / cp tokens of the padded sequence
(cpparity_dump's "contiguous" layout). Everything outside attention is per token and runs on
the shard. Attention needs the whole sequence, so around it an all-to-all trades the sequence
split for a head split: q, k, v go from [B, L, H, Dh] (all heads, my tokens) to
[B, Sp, H/cp, Dh] (every token, my heads); each rank runs ordinary attention with the dense
mask of the global sequence for its heads; a second all-to-all brings the output back to
[B, L, H, Dh]. Key/value heads are repeated to H first (as repeat_kv), so cp must divide H.

The mask needs the global position ids and attention mask: the ranks all-gather them once per
step and every rank rebuilds the masks of docs/masks.md for the whole sequence. The loss is
the global mean: each rank's summed cross-entropy divided by the token count all-reduced over
the ranks; after backward the parameter gradients are all-reduced (summed).
"""

import torch
import torch.distributed as dist

from model import build_masks, document_ids, masked_softmax_attention, repeat_kv


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


def all_gather_sequence(local):
    """[B, L] shards of every rank -> [B, Sp], concatenated in rank order (contiguous layout)."""
    pieces = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, local.contiguous())
    return torch.cat(pieces, dim=1)


class UlyssesAttention:
    """The model's attention function for one step of Ulysses CP.

    Built from this rank's shard of position_ids and attention_mask ([B, L]); holds the dense
    masks of the global sequence. With documents_from_shard=True (a planted bug) each rank finds
    document starts in its own positions only, so every shard boundary starts a document.
    """

    def __init__(self, config, position_ids, attention_mask, documents_from_shard=False):
        world = dist.get_world_size()
        heads = config.num_attention_heads
        if heads % world != 0:
            raise ValueError(f"Ulysses needs cp to divide num_attention_heads: {heads} heads "
                             f"over cp {world}")
        self.kv_groups = heads // config.num_key_value_heads
        global_mask = all_gather_sequence(attention_mask)
        if documents_from_shard:
            # local ids made distinct across ranks, then gathered: documents end at the shard
            local_ids = document_ids(position_ids) + dist.get_rank() * position_ids.shape[1]
            documents = all_gather_sequence(local_ids)
        else:
            documents = document_ids(all_gather_sequence(position_ids))
        self.masks = build_masks(global_mask, documents, config)

    def __call__(self, q, k, v, layer_type):
        q = sequence_to_heads(q)
        k = sequence_to_heads(repeat_kv(k, self.kv_groups))
        v = sequence_to_heads(repeat_kv(v, self.kv_groups))
        out = masked_softmax_attention(q, k, v, self.masks[layer_type])
        return heads_to_sequence(out)


def global_mean_loss(summed_loss, valid_count):
    """(the value to backpropagate, the global loss): summed CE / the all-reduced token count.

    Backpropagating summed_loss / global count on every rank and summing the gradients gives
    the gradient of the global mean.
    """
    count = torch.tensor(float(valid_count), dtype=summed_loss.dtype)
    dist.all_reduce(count)
    if count.item() == 0:
        raise ValueError("no valid label in the whole batch: the loss is undefined")
    total = summed_loss.detach().clone()
    dist.all_reduce(total)
    return summed_loss / count, total / count


def all_reduce_gradients(model):
    """Sum every parameter's gradient over the ranks (each rank saw only its tokens)."""
    for parameter in model.parameters():
        dist.all_reduce(parameter.grad)
