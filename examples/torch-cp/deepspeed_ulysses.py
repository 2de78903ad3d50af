"""Ulysses context parallelism by DeepSpeed itself: `deepspeed.sequence.layer.DistributedAttention`.

This is a third-party implementation judged by `cpparity judge`: none of DeepSpeed's code is
here, it is imported from a pinned pip install (tests/judge/check_external.sh, DeepSpeed 0.18.6,
the newest release whose `import deepspeed` works with torch 1.13: 0.18.7 and later call
`torch.amp.custom_fwd`, which torch 1.13 lacks, and 0.19.1 and later require torch >= 2).

What DeepSpeed does: DistributedAttention wraps a local attention callable. Its forward
all-to-alls q, k and v from this rank's tokens with all heads to every token with this rank's
heads (autograd functions whose backward is the reverse exchange), calls the local attention on
the whole sequence, and all-to-alls the output back to this rank's tokens with all heads.

What this wrapper adds, for the model of model.py (q, k, v are [B, L, H, Dh] on each rank, a
contiguous shard of the padded sequence, as in ulysses.py):
  - the layout: DeepSpeed >= 0.15 takes `batch_dim_idx` in forward, so [B, S, H, Dh] is
    exchanged as it is: batch_dim_idx 0, scatter_idx 2 (heads), gather_idx 1 (sequence). No
    transpose. (DeepSpeed 0.10.2 to 0.14 has no batch_dim_idx and assumes [S, B, H, Dh],
    scatter 2 and gather 0; a wrapper for it would transpose q, k, v to [L, B, H, Dh] and the
    output back.
    The constructor refuses such a version rather than exchange the wrong dimensions.)
  - the local attention: model.masked_softmax_attention with the global [B, Sp, Sp] mask of
    the layer type (cp_common.global_masks), passed through DistributedAttention's **kwargs;
    rotary_pos_emb is given as None by keyword (RoPE is applied by the model before attention,
    at the global positions), so that nothing lands in that positional slot;
  - key/value heads: sent as they are when cp divides num_key_value_heads and repeated to the
    query heads inside the local attention (each rank then holds the key/value heads its query
    heads use); otherwise repeated to num_attention_heads before the exchange, as ulysses.py
    does. DeepSpeed's own path for heads that cp does not divide (`uneven_heads_all2all`)
    needs DeepSpeed's sequence-parallel groups (an mpu or a device mesh; without one every rank
    takes itself for rank 0) and is not used: like ulysses.py this refuses a cp that does not
    divide num_attention_heads;
  - DeepSpeed's communication: `deepspeed.comm.init_distributed` adopts the gloo process group
    that run.py started (DeepSpeed's CPU accelerator falls back to gloo without oneCCL), and
    DS_ACCELERATOR is set to "cpu" unless already set, so that DeepSpeed neither probes for an
    accelerator nor warns that it found none. On the CPU accelerator DeepSpeed's TorchBackend
    JIT-compiles a shared-memory all-reduce op (ShareMemCommBuilder, "deepspeed_shm_comm")
    when it is created; Debian's python3-torch has no C++ headers (torch/extension.h), so that
    compile fails and takes init_distributed with it. The op serves only DeepSpeed's
    inference_all_reduce, which falls back to torch.distributed without it, and
    DistributedAttention never uses it: the wrapper marks it not compatible in
    `deepspeed.ops.__compatible_ops__`, the table DeepSpeed itself consults before building it.
"""

import inspect
import os

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import deepspeed  # noqa: E402
import deepspeed.comm  # noqa: E402
import deepspeed.ops  # noqa: E402
import torch.distributed as dist  # noqa: E402
from deepspeed.sequence.layer import DistributedAttention  # noqa: E402

from model import masked_softmax_attention, repeat_kv  # noqa: E402

VERSION = str(deepspeed.__version__)
BATCH_DIM, SEQUENCE_DIM, HEAD_DIM = 0, 1, 2  # the model's [B, L, H, Dh]
SHARED_MEMORY_OP = "deepspeed_shm_comm"  # DeepSpeed's CPU shared-memory all-reduce, not built


class DeepSpeedUlyssesAttention:
    """The model's attention function for one step of Ulysses CP by DeepSpeed.

    masks: the global {layer type: allowed [B, Sp, Sp]} (cp_common.global_masks); the ranks
    must hold contiguous shards in rank order.
    """

    def __init__(self, config, masks):
        world = dist.get_world_size()
        heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
        if heads % world != 0:
            raise ValueError(f"Ulysses needs cp to divide num_attention_heads: {heads} heads "
                             f"over cp {world}")
        if "batch_dim_idx" not in inspect.signature(DistributedAttention.forward).parameters:
            raise RuntimeError(f"DeepSpeed {VERSION}: DistributedAttention.forward takes no "
                               f"batch_dim_idx ([S, B, H, D] only); this wrapper needs >= 0.15")
        deepspeed.ops.__compatible_ops__[SHARED_MEMORY_OP] = False  # see the module docstring
        deepspeed.comm.init_distributed(dist_backend="gloo", verbose=False)
        self.kv_groups_before = 1 if kv_heads % world == 0 else heads // kv_heads
        self.kv_groups_after = heads // (kv_heads * self.kv_groups_before)
        self.masks = masks
        self.attention = DistributedAttention(self.local_attention, dist.group.WORLD,
                                              scatter_idx=HEAD_DIM, gather_idx=SEQUENCE_DIM)

    def local_attention(self, q, k, v, allowed):
        """q [B, Sp, H/cp, Dh], k and v [B, Sp, Hkv', Dh] (this rank's heads, every token)."""
        k = repeat_kv(k, self.kv_groups_after)
        v = repeat_kv(v, self.kv_groups_after)
        return masked_softmax_attention(q, k, v, allowed)

    def __call__(self, q, k, v, layer_type):
        k = repeat_kv(k, self.kv_groups_before)
        v = repeat_kv(v, self.kv_groups_before)
        return self.attention(q, k, v, batch_dim_idx=BATCH_DIM, rotary_pos_emb=None,
                              allowed=self.masks[layer_type])
