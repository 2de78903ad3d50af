"""torch's own context parallelism of SDPA, `context_parallel`, judged by `cpparity judge`.

run.py --attention torch-cp-ring runs it. As a script it says which cases it claims:

    PYTHONPATH=python python examples/torch-cp/torch_context_parallel.py EXPORT.h5 ...

prints, per export, its case, a tab and `claimed` or the reason this backend does not claim it.

None of the context parallelism is here: it is PyTorch's (written against 2.15),
`torch.distributed.tensor.experimental.context_parallel` with a 1-D DeviceMesh on "cpu" over
the gloo group run.py started. Inside the context torch
  - shards the buffers it is given (input_ids, position_ids, labels and a buffer of the global
    positions 0 .. Sp-1) along the sequence: with load balancing (torch's default, which needs
    is_causal and Sp divisible by 2*cp) its head-tail load balancer (_HeadTailLoadBalancer)
    gives rank r chunks r and 2*cp-1-r of 2*cp, i.e. zigzag; without it, contiguous shards;
  - replaces F.scaled_dot_product_attention: q, k and v become DTensors sharded on the sequence,
    and the SDPA op is dispatched to its ring attention (_templated_ring_attention and its
    backward): key/value blocks rotated with all-gather or all-to-all (set_rotate_method), one
    SDPA per block with is_causal only on the diagonal block, the partial outputs merged by
    log-sum-exp; the backward rotates them again with their gradients.
The token indices written to the dump are the sharded position buffer, i.e. what torch's
sharding did, not a layout formula of ours.

The model (model.py) calls `F.scaled_dot_product_attention(q, k, v, is_causal=True)` with key and
value heads repeated to the query heads (model.repeat_kv). torch's CP SDPA has no mask beyond
is_causal: an attn_mask (attn_bias) is refused ("attn_bias is not supported yet", torch's
_attention.py, _scaled_dot_product_ring_efficient_attention), so this backend claims only cases
whose every layer is full causal attention on unpadded rows of one document each
(`unsupported_reason`; run.py refuses the others). Padding at the end (Sp > S, to a multiple of
2*cp) is harmless under causal attention: only queries at positions >= S see those keys, and
the judge does not compare them (docs/dump-format.md, "Padding").

The one workaround, for the CPU (it changes no maths): torch registers its ring attention only
for the CUDA SDPA ops (flash, efficient, cuDNN; `custom_ops` and `_sdpa_handler` in
torch/distributed/tensor/experimental/_context_parallel/_attention.py, the sharding rules in
_sharding_rules.py). On the CPU, SDPA dispatches to
aten._scaled_dot_product_flash_attention_for_cpu, for which DTensor has no rule: unchanged,
context_parallel stops with "Operator aten._scaled_dot_product_flash_attention_for_cpu.default
does not have a sharding strategy registered". `register_cpu_sdpa` adds that op and its
backward to torch's custom-op table the way torch registers the CUDA flash op: a sharding rule
(q, k, v, out, logsumexp and the gradients sharded on the sequence, as torch's flash rule) and
a handler that, like _sdpa_handler, calls torch's own _templated_ring_attention /
_templated_ring_attention_backward with the CPU op as the per-block attention.
"""

import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.experimental import context_parallel
from torch.distributed.tensor.experimental._context_parallel import _attention as torch_cp
from torch.distributed.tensor.experimental._context_parallel._sharding_rules import (
    _cp_sharding, _single_dim_strategy_context)

import cp_common
import cpparity_dump
from model import CausalLM, Config, repeat_kv, summed_cross_entropy

aten = torch.ops.aten
CPU_FLASH = aten._scaled_dot_product_flash_attention_for_cpu.default
CPU_FLASH_BACKWARD = aten._scaled_dot_product_flash_attention_for_cpu_backward.default
SEQUENCE_DIM = 2  # of q, k, v as SDPA takes them, [B, H, L, Dh]; torch's CP hard-codes it
ATTN_MASK_REASON = "torch SDPA context_parallel refuses attn_mask: only is_causal"
HELD_SHARDING_RULES = []  # the CPU ops' sharding rules, registered for the whole process


# --- the CPU workaround: torch's ring attention registered for the CPU flash op -------------

def ring_cpu_flash_attention(mesh, query, key, value, dropout_p=0.0, is_causal=False, *,
                             attn_mask=None, scale=None):
    """torch's _scaled_dot_product_ring_flash_attention, with the CPU flash op per block."""
    if attn_mask is not None:
        raise NotImplementedError("attn_mask is not supported by torch's CP ring attention")
    return torch_cp._templated_ring_attention(
        mesh.get_group(), SEQUENCE_DIM, CPU_FLASH, query=query, key=key, value=value,
        is_causal=is_causal, dropout_p=dropout_p, scale=scale)


def ring_cpu_flash_attention_backward(mesh, grad_out, query, key, value, out, logsumexp,
                                      dropout_p, is_causal, *, attn_mask=None, scale=None):
    """torch's _scaled_dot_product_ring_flash_attention_backward, with the CPU backward op."""
    if attn_mask is not None:
        raise NotImplementedError("attn_mask is not supported by torch's CP ring attention")
    return torch_cp._templated_ring_attention_backward(
        mesh.get_group(), SEQUENCE_DIM, CPU_FLASH_BACKWARD, grad_out=grad_out,
        grad_out_name="grad_out", query=query, key=key, value=value, out=out,
        logsumexp=logsumexp, is_causal=is_causal, dropout_p=dropout_p, scale=scale)


RING_CALLS = {CPU_FLASH: ring_cpu_flash_attention,
              CPU_FLASH_BACKWARD: ring_cpu_flash_attention_backward}


def cpu_sdpa_handler(op_call, args, kwargs):
    """torch's _sdpa_handler (same steps), its call map holding the CPU flash ops."""
    op_info = DTensor._op_dispatcher.unwrap_to_op_info(op_call, args, kwargs)
    DTensor._op_dispatcher.sharding_propagator.propagate(op_info)
    output_sharding = op_info.output_sharding
    if output_sharding is None or output_sharding.needs_redistribute:
        raise AssertionError(f"{op_call}: q, k and v must all be sharded on the sequence")
    local_results = RING_CALLS[op_call](op_info.compute_mesh, *op_info.local_args,
                                        **op_info.local_kwargs)
    return DTensor._op_dispatcher.wrap(local_results, output_sharding.output_spec)


def cpu_flash_strategy(op, args_schema, kwargs_schema):
    """(output, logsumexp) and (q, k, v) sharded on the sequence, as torch's flash rule.

    An attn_mask (sharded on its query dimension by context_parallel's input wrapper) is given
    a placement too, so that it reaches ring_cpu_flash_attention's refusal.
    """
    with_mask = kwargs_schema.get("attn_mask") is not None
    return [[_cp_sharding()] * (5 + with_mask)]


def cpu_flash_backward_strategy(op, args_schema, kwargs_schema):
    """(grad_q, grad_k, grad_v) and (grad_out, q, k, v, out, logsumexp) on the sequence."""
    with_mask = kwargs_schema.get("attn_mask") is not None
    return [[_cp_sharding()] * (9 + with_mask)]


def register_cpu_sdpa():
    """Put the CPU flash ops in torch's CP custom-op table, with their sharding rules.

    Process-wide and idempotent; torch's context_parallel merges `custom_ops` into DTensor's
    handlers when it is entered and takes them out when it exits.
    """
    if CPU_FLASH in torch_cp.custom_ops:
        return
    for op, strategy in ((CPU_FLASH, cpu_flash_strategy),
                         (CPU_FLASH_BACKWARD, cpu_flash_backward_strategy)):
        rule = _single_dim_strategy_context(op, strategy)
        rule.__enter__()
        HELD_SHARDING_RULES.append(rule)  # its exit (also on garbage collection) removes it
        torch_cp.custom_ops[op] = cpu_sdpa_handler


# --- what this backend claims ------------------------------------------------------------------

def unsupported_reason(export):
    """None when every layer's mask of the case is plain causal attention, else the reason."""
    config = Config(export.model)
    inputs = export.inputs
    real = inputs["attention_mask"] == 1
    needs = []
    if not real.all():
        needs.append("padding")
    steps = np.diff(inputs["position_ids"], axis=1)
    if ((steps != 1) & real[:, 1:] & real[:, :-1]).any():
        needs.append("packed documents or a position jump")
    other_layers = sorted({t for t in config.layer_types if t != "full_attention"})
    needs.extend(other_layers)
    if not needs:
        return None
    return f"{ATTN_MASK_REASON} (the case needs {', '.join(needs)})"


# --- one step on one rank ----------------------------------------------------------------------

class SdpaAttention:
    """The model's attention: SDPA, causal, on this rank's tokens; context_parallel does the rest.

    F.scaled_dot_product_attention is looked up at each call: inside context_parallel it is
    torch's CP replacement.
    """

    def __init__(self, config):
        self.groups = config.num_attention_heads // config.num_key_value_heads

    def __call__(self, q, k, v, layer_type):
        q, k, v = (x.transpose(1, 2) for x in (q, repeat_kv(k, self.groups),
                                                repeat_kv(v, self.groups)))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)


def write_step_dump(rank, args, dump_path):
    """Run the step under torch's context_parallel on this rank and write its dump."""
    cp = args.cp
    export = cpparity_dump.read_export(args.export)  # a case it claims (run.py checks)
    config = Config(export.model)
    model = CausalLM(config, args.dtype)
    model.load_weights(export.weights)
    register_cpu_sdpa()
    torch_cp.set_rotate_method(args.rotate)
    balance = args.load_balancer == "head-tail"
    torch_cp._cp_options.enable_load_balance = balance  # read by context_parallel on entry

    # the global padded inputs; torch shards them (and the positions) inside the context
    padded_len = export.padded_length(cp, 2 if balance else 1)
    inputs = export.pad_inputs(padded_len)
    buffers = {name: torch.as_tensor(inputs[name], dtype=torch.int64)
               for name in ("input_ids", "position_ids", "labels")}
    buffers["positions"] = torch.arange(padded_len).expand(export.batch_size, -1).clone()
    mesh = init_device_mesh("cpu", (cp,))
    with context_parallel(mesh, buffers=list(buffers.values()),
                          buffer_seq_dims=[1] * len(buffers),
                          no_restore_buffers=set(buffers.values())):
        if args.wrong == "load-balance-off-in-ring":
            # planted: the buffers were sharded head-tail, the ring computes as if contiguous
            torch_cp._cp_options.enable_load_balance = False
        labels = buffers["labels"]
        logits = model(buffers["input_ids"], buffers["position_ids"], SdpaAttention(config))
        to_backward, loss = cp_common.global_mean_loss(summed_cross_entropy(logits, labels),
                                                       int((labels != -100).sum()))
        to_backward.backward()
    cp_common.all_reduce_gradients(model)

    positions = sharded_positions(buffers["positions"])
    if args.wrong == "token-indices-unsharded-order":
        # planted: the dump states contiguous shards whatever torch's balancer did
        positions = cpparity_dump.layout_token_indices("contiguous", cp, rank, padded_len)
    write_dump(dump_path, export, rank, cp, positions, loss, logits, model, args.dtype,
               f"sdpa-cpu-flash-ring-{args.rotate}")


def sharded_positions(positions):
    """The global positions torch's sharding left on this rank ([B, L_r], rows identical)."""
    if not (positions == positions[:1]).all():
        raise RuntimeError("torch sharded the batch rows differently: the dump (version 1) "
                           "states one set of token indices for every row")
    return positions[0].numpy()


def write_dump(path, export, rank, cp, positions, loss, logits, model, dtype, kernel):
    """This rank's dump: its logits at `positions`, the loss, every full gradient."""
    cpparity_dump.write_rank_dump(
        path, export=export, rank=rank, cp=cp, token_indices=positions, loss=loss,
        logits=logits,
        gradients={name: parameter.grad for name, parameter in model.named_parameters()},
        framework="torch", framework_version=str(torch.__version__), dtype=dtype,
        kernel=kernel)


def main(paths):
    """Print each export's case and `claimed`, or why this backend does not claim it."""
    for path in paths:
        export = cpparity_dump.read_export(path)
        print(f"{export.case}\t{unsupported_reason(export) or 'claimed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
