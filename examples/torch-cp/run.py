#!/usr/bin/python3
"""Run model.md's model with context-parallel attention on CPU processes, one dump per rank.

    run.py EXPORT.h5 --cp N --attention ulysses|ring|deepspeed-ulysses --out DIR [--dtype f32|bf16]
           [--wrong NAME]
    run.py EXPORT.h5 --cp N --attention torch-cp-ring --out DIR [--rotate allgather|alltoall]
           [--load-balancer head-tail|none] [--dtype f32|bf16] [--wrong NAME]
    run.py EXPORT.h5 --cp N --attention torch-cp-flex --out DIR
           [--load-balancer head-tail|ptrr|none] [--dtype f32|bf16] [--wrong NAME]

Starts N processes (torch.multiprocessing, forked from this one so that none imports torch again;
torch.distributed with gloo on 127.0.0.1). Each reads
the export (python/cpparity_dump.py), takes its shard of the padded inputs (contiguous for
Ulysses, zigzag for ring attention), runs one forward and backward step and writes
DIR/rank_<r>.h5 for `cpparity judge EXPORT.h5 DIR/rank_*.h5`: its logits, the global loss and
every parameter's full, all-reduced gradient. deepspeed-ulysses is DeepSpeed's own Ulysses
(deepspeed.sequence.layer.DistributedAttention, deepspeed_ulysses.py; needs DeepSpeed installed,
see tests/judge/check_external.sh), contiguous like ulysses. torch-cp-ring and torch-cp-flex are
torch 2's own context parallelism (torch_context_parallel.py: context_parallel with SDPA's ring
attention; torch_flex_context_parallel.py: flex_attention with its CP block mask), imported only
for those choices (they need torch 2 with torch.distributed.tensor.experimental._context_parallel,
2.15 in scripts/torch2-env.sh; tests/judge/check_torch2_context_parallel.sh): torch shards the
inputs itself (--load-balancer: head-tail, zigzag; ptrr, flex only; none, contiguous) and the
dump states the positions torch's sharding gave each rank. torch-cp-ring refuses a case whose
mask is more than causal attention, saying why.

--wrong plants one bug a CP implementation can have; the judge must fail it:
  mask-from-local-positions  each rank finds documents in its own positions only, so every
                             document crossing a shard boundary is split there
  labels-shifted-in-shard    labels re-derived inside each shard from its input_ids instead of
                             the global labels: the target across each shard boundary is lost
  gradients-not-reduced      the all-reduce of the gradients is skipped
  lse-merge-max-only         (ring) partial outputs merged with the larger log-sum-exp instead
                             of log(e^a + e^b): each block's output is rescaled as if the
                             other blocks' keys did not exist
  zigzag-second-chunk-first  (ring) each rank takes its two zigzag chunks of the inputs in the
                             wrong order (chunk 2*cp-1-r first), while its token indices, masks
                             and ring bookkeeping say chunk r comes first
  load-balance-off-in-ring   (torch-cp-ring) torch shards the buffers head-tail, but its ring
                             attention runs with load balancing off (_cp_options), so it skips
                             and masks key blocks as if the shards were contiguous
  token-indices-unsharded-order
                             (torch-cp-ring) the dump states contiguous shards instead of the
                             positions torch's sharding gave the rank
  block-mask-on-local-queries
                             (torch-cp-flex) each rank builds its block mask on its local query
                             indices (create_block_mask on the shard) instead of torch's CP
                             block mask, which rewrites them to global positions
"""

import argparse
import importlib.util
import os
import socket
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:  # the package installed into this python (pip install ./python)
    import cpparity_dump
except ImportError:  # else the package's folder of this clone, so that run.py runs from it
    sys.path.append(os.path.join(HERE, "..", "..", "python"))
    import cpparity_dump

import cp_common  # noqa: E402
from model import CausalLM, Config, shifted_labels, summed_cross_entropy  # noqa: E402
from ring import RingAttention  # noqa: E402
from ulysses import UlyssesAttention  # noqa: E402

WRONG = ("mask-from-local-positions", "labels-shifted-in-shard", "gradients-not-reduced",
         "lse-merge-max-only", "zigzag-second-chunk-first")
RING_ONLY = ("lse-merge-max-only", "zigzag-second-chunk-first")
DTYPES = ("f32", "bf16")
LAYOUTS = {"ulysses": "contiguous", "ring": "zigzag", "deepspeed-ulysses": "contiguous"}
# torch 2's own CP (modules imported only when chosen): {choice: (module, its --wrong names)}
TORCH2 = {"torch-cp-ring": ("torch_context_parallel",
                            ("load-balance-off-in-ring", "token-indices-unsharded-order")),
          "torch-cp-flex": ("torch_flex_context_parallel",
                            ("block-mask-on-local-queries",))}
ROTATE_METHODS = ("allgather", "alltoall")
LOAD_BALANCERS = ("head-tail", "ptrr", "none")
KERNELS = {"ulysses": "eager-masked-softmax", "ring": "eager-ring-lse-merge",
           "deepspeed-ulysses": "deepspeed-ulysses"}  # + "-<DeepSpeed version>"


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_rank(rank, args, port):
    """One rank: join the gloo group, run the step on this rank's shard, write its dump."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.cp)
    try:
        write_step_dump(rank, args)
    finally:
        dist.destroy_process_group()


def write_step_dump(rank, args):
    if args.attention in TORCH2:
        backend = importlib.import_module(TORCH2[args.attention][0])
        backend.write_step_dump(rank, args, os.path.join(args.out, f"rank_{rank}.h5"))
        return
    cp = args.cp
    export = cpparity_dump.read_export(args.export)
    config = Config(export.model)
    model = CausalLM(config, args.dtype)
    model.load_weights(export.weights)

    # this rank's shard of the padded inputs: all it holds of the sequence
    layout = LAYOUTS[args.attention]
    padded_len = export.padded_length(cp, cpparity_dump.LAYOUT_CHUNKS_PER_RANK[layout])
    positions = export.token_indices(layout, cp, rank, padded_len)
    taken = positions
    if args.wrong == "zigzag-second-chunk-first":
        half = len(positions) // 2
        taken = np.concatenate([positions[half:], positions[:half]])
    shard = {name: torch.as_tensor(value[:, taken], dtype=torch.int64)
             for name, value in export.pad_inputs(padded_len).items()}
    labels = shard["labels"]
    if args.wrong == "labels-shifted-in-shard":
        labels = shifted_labels(shard["input_ids"], shard["attention_mask"],
                                shard["position_ids"])

    masks = cp_common.global_masks(
        config, torch.as_tensor(positions), shard["position_ids"], shard["attention_mask"],
        documents_from_shard=args.wrong == "mask-from-local-positions")
    framework, framework_version = "torch", str(torch.__version__)
    kernel = KERNELS[args.attention]
    if args.attention == "ulysses":
        attention = UlyssesAttention(config, masks)
    elif args.attention == "deepspeed-ulysses":
        import deepspeed_ulysses  # only this choice needs DeepSpeed
        attention = deepspeed_ulysses.DeepSpeedUlyssesAttention(config, masks)
        framework, framework_version = "deepspeed", deepspeed_ulysses.VERSION
        kernel = f"{kernel}-{framework_version}"
    else:
        every_rank = [torch.as_tensor(export.token_indices(layout, cp, other, padded_len))
                      for other in range(cp)]
        attention = RingAttention(config, every_rank, masks,
                                  lse_merge_max_only=args.wrong == "lse-merge-max-only")
    logits = model(shard["input_ids"], shard["position_ids"], attention)
    to_backward, loss = cp_common.global_mean_loss(summed_cross_entropy(logits, labels),
                                                 int((labels != -100).sum()))
    to_backward.backward()
    if args.wrong != "gradients-not-reduced":
        cp_common.all_reduce_gradients(model)

    cpparity_dump.write_rank_dump(
        os.path.join(args.out, f"rank_{rank}.h5"), export=export, rank=rank, cp=cp,
        token_indices=positions, loss=loss, logits=logits,
        gradients={name: parameter.grad for name, parameter in model.named_parameters()},
        framework=framework, framework_version=framework_version, dtype=args.dtype,
        kernel=kernel)


def has_torch_context_parallel():
    """Whether this torch has the context-parallel package torch_*context_parallel.py use."""
    try:
        return importlib.util.find_spec(
            "torch.distributed.tensor.experimental._context_parallel") is not None
    except ImportError:  # torch.distributed.tensor itself is missing (torch 1.13)
        return False


def parse_arguments(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("export", help="a `cpparity export` file")
    parser.add_argument("--cp", type=int, required=True, help="number of ranks (processes)")
    parser.add_argument("--attention", choices=tuple(LAYOUTS) + tuple(TORCH2), required=True,
                        help="the context-parallel attention scheme")
    parser.add_argument("--out", required=True, help="directory for rank_<r>.h5 (created)")
    parser.add_argument("--dtype", choices=DTYPES, default="f32",
                        help="f32, or model.md's bf16 mixed precision (default f32)")
    parser.add_argument("--rotate", choices=ROTATE_METHODS,
                        help="torch-cp-ring: how torch's ring rotates key/value blocks "
                             "(set_rotate_method; default allgather, torch's default)")
    parser.add_argument("--load-balancer", choices=LOAD_BALANCERS,
                        help="torch-cp-ring and torch-cp-flex: torch's load balancer before "
                             "sharding (default head-tail; ptrr for torch-cp-flex only)")
    parser.add_argument("--wrong", choices=WRONG + sum((names for _, names in TORCH2.values()),
                                                      ()),
                        help="plant a CP bug (see above)")
    args = parser.parse_args(argv)
    if args.cp < 1:
        parser.error(f"--cp {args.cp}: expected >= 1")
    if args.attention in TORCH2:
        module, own_wrong = TORCH2[args.attention]
        if args.wrong is not None and args.wrong not in own_wrong:
            parser.error(f"--wrong {args.wrong} is not a bug of {args.attention}: it takes "
                         f"{', '.join(own_wrong)}")
        if args.rotate is not None and args.attention != "torch-cp-ring":
            parser.error("--rotate is an option of --attention torch-cp-ring")
        if args.load_balancer == "ptrr" and args.attention != "torch-cp-flex":
            parser.error("--load-balancer ptrr needs a block mask: --attention torch-cp-flex")
        args.rotate = args.rotate or "allgather"
        args.load_balancer = args.load_balancer or "head-tail"
        if not has_torch_context_parallel():
            parser.error(f"--attention {args.attention} needs torch's context parallelism "
                         f"(torch.distributed.tensor.experimental._context_parallel), which "
                         f"torch {torch.__version__} lacks: use scripts/torch2-env.sh's python")
        return args
    if args.rotate is not None or args.load_balancer is not None:
        parser.error("--rotate and --load-balancer are options of torch-cp-ring/torch-cp-flex")
    if args.wrong is not None and args.wrong not in WRONG:
        parser.error(f"--wrong {args.wrong} is a bug of torch-cp-ring or torch-cp-flex")
    if args.wrong in RING_ONLY and args.attention != "ring":
        parser.error(f"--wrong {args.wrong} is a bug of ring attention: use --attention ring")
    if args.attention == "deepspeed-ulysses" and importlib.util.find_spec("deepspeed") is None:
        parser.error("--attention deepspeed-ulysses needs DeepSpeed, which this python lacks "
                     "(tests/judge/check_external.sh makes a venv with it)")
    return args


def main(argv):
    args = parse_arguments(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.attention == "deepspeed-ulysses":
        import deepspeed_ulysses  # noqa: F401  imported once here; the forked ranks inherit it
    if args.attention in TORCH2:
        backend = importlib.import_module(TORCH2[args.attention][0])  # likewise
        if args.attention == "torch-cp-ring":
            export = cpparity_dump.read_export(args.export)
            reason = backend.unsupported_reason(export)
            if reason is not None:
                sys.exit(f"run.py: torch-cp-ring does not claim case {export.case}: {reason}")
    # fork, not spawn: a spawned rank starts a new interpreter and imports torch (and DeepSpeed)
    # again, seconds each; nothing here has started a thread or touched torch's thread pools yet
    mp.start_processes(run_rank, args=(args, free_port()), nprocs=args.cp, join=True,
                       start_method="fork")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
