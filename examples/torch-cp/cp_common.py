"""What every context-parallel scheme here shares: the global masks, the loss, the gradients.

Each rank holds some positions of the padded sequence (`token_indices`, any layout). The mask of
docs/masks.md depends on the whole row (documents, left padding, the chunk grid), so the ranks
all-gather their position ids, attention mask and token indices, and every rank rebuilds the
dense masks of the global sequence. The loss is the global mean: each rank's summed
cross-entropy divided by the label count all-reduced over the ranks; after backward the
parameter gradients are all-reduced (summed).
"""

import torch
import torch.distributed as dist

from model import build_masks, document_ids


def all_gather_global(local, token_indices, padded_len):
    """[B, L_r] values at this rank's positions -> [B, Sp], every rank's values in place."""
    world = dist.get_world_size()
    values = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(values, local.contiguous())
    indices = [torch.empty_like(token_indices) for _ in range(world)]
    dist.all_gather(indices, token_indices.contiguous())
    gathered = torch.empty(local.shape[0], padded_len, dtype=local.dtype)
    gathered[:, torch.cat(indices)] = torch.cat(values, dim=1)
    return gathered


def global_masks(config, token_indices, position_ids, attention_mask, documents_from_shard):
    """{layer type: allowed [B, Sp, Sp]} of the global sequence, from this rank's [B, L_r].

    documents_from_shard=True is a planted bug: each rank finds document starts in its own
    positions only (ids made distinct across ranks, then gathered), so a document that crosses
    the edge of a rank's shard is split there.
    """
    padded_len = position_ids.shape[1] * dist.get_world_size()
    mask = all_gather_global(attention_mask, token_indices, padded_len)
    positions = all_gather_global(position_ids, token_indices, padded_len)
    if documents_from_shard:
        local_ids = document_ids(position_ids) + dist.get_rank() * position_ids.shape[1]
        documents = all_gather_global(local_ids, token_indices, padded_len)
    else:
        documents = document_ids(positions)
    return build_masks(mask, documents, config, positions)


def global_mean_loss(summed_loss, valid_count):
    """(the value to backpropagate, the global loss): summed CE / the all-reduced label count.

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
