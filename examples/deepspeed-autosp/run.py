"""DeepSpeed's AutoSP (automatic Ulysses sequence parallelism by a compile pass), one dump per rank.

    run.py EXPORT.h5 --cp N --out DIR [--dtype f32|bf16] [--packing masks|position-ids]
           [--wrong labels-shifted-in-shard]

Judged by `cpparity judge EXPORT.h5 DIR/rank_*.h5`. Needs torch >= 2.9, DeepSpeed >= 0.19.8 and
transformers 5 (scripts/torch2-env.sh's python); tests/judge/check_deepspeed_autosp.sh runs it.

What AutoSP is (DeepSpeed 0.19.8, deepspeed/compile/): with the DeepSpeed config
`compile: {deepcompile: true, passes: ["autosp"]}` and `sequence_parallel_size: cp`,
`engine.compile()` compiles the model with torch.compile (fullgraph) and a backend
(compile/init_sp.py) that rewrites the captured FX graph (compile/passes/sp_compile.py) before
inductor compiles it. Every rank is given the WHOLE batch; the inputs tagged by
`prepare_autosp_inputs` (input_ids, labels, position_ids) are sliced in the graph to the rank's
contiguous shard of the sequence (rank r of cp holds [r*S/cp, (r+1)*S/cp)); an all-to-all before
each `F.scaled_dot_product_attention` turns q, k, v from [B, H, S/cp, Dh] into [B, H/cp, S, Dh]
and one after it turns the output back (their backward is the reverse exchange); an attention
mask whose query rows came from the shard is all-gathered along the queries
(`gather_attn_mask_queries`). The model is never told: it is transformers' own code, and its
mask functions (transformers/masking_utils.py) run inside the rewritten graph. (With the models
here that mask is [B, 1, S, S]: transformers sizes its query rows with the sequence-length
symbol itself, which AutoSP replaces by S/cp only in what depends on the sharded inputs, so
gather_attn_mask_queries leaves it as it is and SDPA gets the whole mask with the gathered
queries.)

What this script adds, as a user of AutoSP would:
  - the model: transformers' LlamaForCausalLM (every layer full attention) or
    MinistralForCausalLM (layer_types with sliding_attention layers: Mistral's architecture with
    Llama's parameter names and per-layer sliding windows, `kv_idx > q_idx - W` as in
    docs/masks.md), attn_implementation "sdpa" (AutoSP finds SDPA calls), use_cache off,
    loaded with the export's weights (rounded to float32). Chunked attention has no such model in
    transformers (only Llama4, a different architecture), so it is refused.
  - the mask input: the export's 2D padding attention_mask, from which transformers builds the
    4D mask inside the compiled graph. A packed batch (a position step other than +1 between
    real tokens) gets ready-made 4D masks instead, built by transformers from the whole
    sequence (packed_document_masks: transformers' own packing format does not compile under
    AutoSP; `--packing position-ids` shows it).
  - the loss, computed with the model in the compiled module (CausalLMWithLoss): the export's
    labels are already shifted; AutoSP shards them with the input_ids. The loss of rank r is its
    summed cross entropy divided by its share N/cp of the global label count N: DeepSpeed
    averages gradients over its data-parallel group, which without a device mesh or mpu is all
    cp ranks although they hold one sequence, so the mean of the ranks' losses is the global
    mean loss and DeepSpeed's average is its gradient. The dumped loss is that mean (all-reduced
    here, outside the step).
  - the step: `engine.backward(loss)`, which all-reduces the gradients (DeepSpeed's code); the
    dumped gradients are then every parameter's `.grad`. ZeRO stage 0, an SGD optimizer with
    lr 0 that is never stepped.
  - bf16: DeepSpeed's `bf16: {enabled: true}` (parameters and activations in bfloat16).

CPU workarounds (none changes DeepSpeed's maths):
  - DS_ACCELERATOR=cpu, and DeepSpeed's CPU shared-memory all-reduce op `deepspeed_shm_comm`
    marked incompatible in `deepspeed.ops.__compatible_ops__` (as examples/torch-cp/
    deepspeed_ulysses.py does): DeepSpeed's TorchBackend would JIT-build that C++ op when
    `init_distributed` creates it; only DeepSpeed's inference all-reduce uses it.
  - nothing else: DeepSpeed's AutoSP unit test skips on the CPU accelerator ("CPU does not
    support this test yet", tests/unit/v1/compile/test_compile_autosp.py), but the pass,
    its custom ops (torch.ops.autosp.*: gloo all_to_all_single and all_gather) and inductor's
    C++ backend run on CPU processes as they are.

--wrong plants a CP bug the judge must fail:
  labels-shifted-in-shard  the model is given unshifted labels and shifts them itself, as
                           DeepSpeed's own AutoSP test does (labels=input_ids): AutoSP shards the
                           labels before the shift, so the target across each shard boundary is
                           lost (nothing changes at cp 1)
  loss-mean-of-shard-means each rank's loss is the mean over its own shard's labels, as in
                           DeepSpeed's AutoSP test: DeepSpeed's average of the gradients is then
                           the gradient of the mean of the shard means, not of the global mean,
                           unless every shard holds as many labels
"""

import argparse
import os
import socket
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
try:  # the package installed into this python (pip install ./python)
    import cpparity_dump
except ImportError:  # else the package's folder of this clone, so that run.py runs from it
    sys.path.append(os.path.join(HERE, "..", "..", "python"))
    import cpparity_dump

WRONG = ("labels-shifted-in-shard", "loss-mean-of-shard-means")
DTYPES = ("f32", "bf16")
PACKINGS = ("masks", "position-ids")
IGNORED_LABEL = -100
SHARED_MEMORY_OP = "deepspeed_shm_comm"  # DeepSpeed's CPU shared-memory all-reduce, not built


def unsupported_reason(export):
    """Why AutoSP with a transformers model cannot express this case, or None."""
    if "chunked_attention" in export.model["layer_types"]:
        return ("chunked attention: transformers' only chunked-attention model is Llama4, not "
                "this architecture (docs/model.md), so there is no transformers model for AutoSP "
                "to compile")
    return None


def is_packed(inputs):
    """Whether some row has two consecutive real tokens whose positions do not step by +1."""
    real = inputs["attention_mask"].astype(bool)
    positions = inputs["position_ids"]
    both_real = real[:, 1:] & real[:, :-1]
    return bool((both_real & (positions[:, 1:] - positions[:, :-1] != 1)).any())


def transformers_model(model_config, weights, torch_dtype):
    """transformers' Llama (all layers full) or Ministral (some sliding) with the export weights."""
    import transformers

    layer_types = list(model_config["layer_types"])
    common = dict(
        vocab_size=model_config["vocab_size"], hidden_size=model_config["hidden_size"],
        intermediate_size=model_config["intermediate_size"],
        num_hidden_layers=model_config["num_hidden_layers"],
        num_attention_heads=model_config["num_attention_heads"],
        num_key_value_heads=model_config["num_key_value_heads"],
        head_dim=model_config["head_dim"], rms_norm_eps=model_config["rms_norm_eps"],
        rope_parameters={"rope_type": "default", "rope_theta": model_config["rope_theta"]},
        tie_word_embeddings=bool(model_config["tie_word_embeddings"]), attention_bias=False,
        max_position_embeddings=4096, pad_token_id=None, use_cache=False,
        attn_implementation="sdpa")
    if "sliding_attention" in layer_types:
        config = transformers.MinistralConfig(layer_types=layer_types,
                                              sliding_window=model_config["sliding_window"],
                                              **common)
        model = transformers.MinistralForCausalLM(config)
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    state = {name: torch.as_tensor(np.asarray(value), dtype=torch.float32)
             for name, value in weights.items()}
    _, unexpected = model.load_state_dict(state, strict=False)
    names = set(dict(model.named_parameters()))
    if unexpected or names - set(state):
        raise RuntimeError(f"weights do not match the transformers model: missing "
                           f"{sorted(names - set(state))}, unexpected {sorted(unexpected)}")
    return model.to(torch_dtype)


class CausalLMWithLoss(torch.nn.Module):
    """The transformers model and the loss, compiled together by engine.compile().

    The loss is computed here, not by transformers: transformers' ForCausalLMLoss does
    `shift_labels.view(-1)` (transformers/loss/loss_utils.py:71), and the labels AutoSP slices
    in the graph are a non-contiguous [B, S/cp] view when B > 1, so the compile fails ("Cannot
    view a tensor with shape torch.Size([s52, (s16//2)]) and strides (s16, 1) as a tensor with
    shape (s52*((s16//2)),)!"). `reshape` copies where it must; the maths is the same.
    """

    def __init__(self, model, label_share, shift_in_shard):
        super().__init__()
        self.model = model
        self.label_share = label_share
        self.shift_in_shard = shift_in_shard

    def forward(self, input_ids, attention_mask, position_ids, labels):
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask,
                            position_ids=position_ids).logits
        if self.shift_in_shard:  # --wrong labels-shifted-in-shard: transformers' shift, per shard
            labels = torch.nn.functional.pad(labels, (0, 1), value=IGNORED_LABEL)[:, 1:]
        summed = torch.nn.functional.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
            ignore_index=IGNORED_LABEL, reduction="sum")
        return summed / self.label_share, logits


def packed_document_masks(model, tensors):
    """The 4D masks of a packed batch, built by transformers from the whole sequence.

    transformers' packing format (documents from position_ids, no attention_mask) cannot be
    compiled by AutoSP: the packed-sequence mask is made inside the graph from the sharded
    position_ids, its key dimension becomes S/cp, and AutoSP's shape propagation fails
    (sp_compile.py:328, pass_propagate_shapes: "expand: attempting to expand a dimension of
    length s38 -> (s38//2)"); were it to get further, gather_attn_mask_queries refuses a mask
    whose key dimension is sharded and advises to "Build the mask from the full, unsharded
    sequence length instead". So, as advised, transformers' own mask functions build the masks
    here, eagerly, from the full position_ids (documents); padding keys are masked with the 2D
    padding mask; the model gets them ready-made: a 4D tensor, or {layer type: 4D tensor} for
    Ministral.
    """
    from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask

    batch, length = tensors["input_ids"].shape
    arguments = dict(config=model.config,
                     # only its batch size, length, dtype and device are read
                     inputs_embeds=torch.empty(batch, length, 1, dtype=model.dtype),
                     attention_mask=None, cache=None, position_ids=tensors["position_ids"])
    # transformers' packed masks compare positions, not indices (remap_positions_for_packed_
    # sequence), which inside a document is the same; padding keys are masked here, by index
    keys = tensors["attention_mask"].bool()[:, None, None, :]
    masks = {"full_attention": create_causal_mask(**arguments) & keys}
    if "sliding_attention" not in getattr(model.config, "layer_types", ()):  # Llama: none
        return masks["full_attention"]
    masks["sliding_attention"] = create_sliding_window_causal_mask(**arguments) & keys
    return masks


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_rank(rank, args, port):
    """One rank: join the gloo group, run the AutoSP step, write its dump."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE=str(args.cp))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.cp)
    try:
        write_step_dump(rank, args)
    finally:
        dist.destroy_process_group()


def write_step_dump(rank, args):
    import deepspeed
    import deepspeed.comm
    import deepspeed.ops
    from deepspeed.compile.passes.sp_compile import prepare_autosp_inputs

    cp = args.cp
    deepspeed.ops.__compatible_ops__[SHARED_MEMORY_OP] = False  # see the module docstring
    deepspeed.comm.init_distributed(dist_backend="gloo", verbose=False)
    export = cpparity_dump.read_export(args.export)
    torch_dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    model = transformers_model(export.model, export.weights, torch_dtype)

    # every rank is given the whole (padded) batch; AutoSP slices the tagged inputs in the graph
    padded_len = export.padded_length(cp, cpparity_dump.LAYOUT_CHUNKS_PER_RANK["contiguous"])
    inputs = export.pad_inputs(padded_len)
    tensors = {name: torch.as_tensor(value, dtype=torch.int64) for name, value in inputs.items()}
    labels = tensors["labels"]
    label_count = int((labels != IGNORED_LABEL).sum())
    shift_in_shard = args.wrong == "labels-shifted-in-shard"
    if shift_in_shard:
        unshifted = torch.full_like(labels, IGNORED_LABEL)
        unshifted[:, 1:] = labels[:, :-1]  # shifting it on the whole row gives `labels` back
        labels = unshifted
    packed = is_packed(inputs)
    input_ids, labels, position_ids, attention_mask = prepare_autosp_inputs(
        tensors["input_ids"], labels, tensors["position_ids"],
        None if packed else tensors["attention_mask"])
    if packed and args.packing == "masks":
        attention_mask = packed_document_masks(model, tensors)

    positions = export.token_indices("contiguous", cp, rank, padded_len)
    label_share = label_count / cp
    if args.wrong == "loss-mean-of-shard-means":
        label_share = int((tensors["labels"][:, positions] != IGNORED_LABEL).sum())
    step_module = CausalLMWithLoss(model, label_share, shift_in_shard)
    ds_config = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 0},
                 "optimizer": {"type": "SGD", "params": {"lr": 0.0}},
                 "compile": {"deepcompile": True, "passes": ["autosp"]},
                 "sequence_parallel_size": cp, "bf16": {"enabled": args.dtype == "bf16"}}
    engine, _, _, _ = deepspeed.initialize(config=ds_config, model=step_module,
                                           model_parameters=step_module.parameters())
    engine.compile(compile_kwargs={"dynamic": True})

    local_loss, logits = engine(input_ids, attention_mask, position_ids, labels)
    engine.backward(local_loss)
    loss = local_loss.detach().float().clone()
    dist.all_reduce(loss)
    loss /= cp

    if logits.shape[1] != len(positions):
        raise RuntimeError(f"AutoSP gave rank {rank} {logits.shape[1]} logits rows, "
                           f"expected its contiguous shard of {len(positions)}")
    cpparity_dump.write_rank_dump(
        os.path.join(args.out, f"rank_{rank}.h5"), export=export, rank=rank, cp=cp,
        token_indices=positions, loss=loss, logits=logits,
        gradients={name: parameter.grad for name, parameter in model.named_parameters()},
        framework="deepspeed", framework_version=str(deepspeed.__version__), dtype=args.dtype,
        kernel=f"autosp-sdpa-inductor-cpu-torch-{torch.__version__}")


def parse_arguments(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("export", help="a `cpparity export` file")
    parser.add_argument("--cp", type=int, required=True,
                        help="number of ranks (processes) = sequence_parallel_size")
    parser.add_argument("--out", required=True, help="directory for rank_<r>.h5 (created)")
    parser.add_argument("--dtype", choices=DTYPES, default="f32",
                        help="f32, or DeepSpeed's bf16 (default f32)")
    parser.add_argument("--packing", choices=PACKINGS, default="masks",
                        help="how a packed batch is given: 4D masks built by transformers from "
                             "the whole sequence (masks, the default) or transformers' packing "
                             "format, position_ids and no attention_mask (position-ids: AutoSP "
                             "cannot compile it, see packed_document_masks)")
    parser.add_argument("--wrong", choices=WRONG, help="plant a CP bug (see above)")
    args = parser.parse_args(argv)
    if args.cp < 1:
        parser.error(f"--cp {args.cp}: expected >= 1")
    return args


def main(argv):
    args = parse_arguments(argv)
    export = cpparity_dump.read_export(args.export)
    reason = unsupported_reason(export)
    if reason is not None:
        sys.exit(f"run.py: DeepSpeed AutoSP does not claim case {export.case}: {reason}")
    os.makedirs(args.out, exist_ok=True)
    import deepspeed  # noqa: F401  imported once here; the forked ranks inherit it
    import transformers  # noqa: F401  likewise
    # fork, not spawn: a spawned rank would import torch, DeepSpeed and transformers again
    mp.start_processes(run_rank, args=(args, free_port()), nprocs=args.cp, join=True,
                       start_method="fork")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
