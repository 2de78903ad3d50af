"""transformers' own causal LMs under DeepSpeed's Ulysses sequence parallelism for HF models
(ALST: `UlyssesSPAttentionHF`), set up through accelerate as its users do; one dump per rank.

    import deepspeed_sp
    code = deepspeed_sp.run(export_path, out_dir, cp=2, model_key="llama", dtype="f32",
                            zero_stage=0, loss="trainer", wrong=None)

What is judged (accelerate 1.16, DeepSpeed 0.19.8, transformers 5.25; every line of it theirs):
  - `Accelerator(parallelism_config=ParallelismConfig(sp_backend="deepspeed", sp_size=cp,
    sp_handler=DeepSpeedSequenceParallelConfig(sp_attn_implementation="sdpa")),
    deepspeed_plugin=DeepSpeedPlugin(...))` and `accelerator.prepare(model, optimizer,
    dataloader)`: accelerate calls `UlyssesSPAttentionHF.register_with_transformers`, which
    replaces transformers' "sdpa" attention function by DeepSpeed's wrapper (all-to-all of q, k,
    v from [B, H, S/cp, Dh] to [B, H/cp, S, Dh], all-gather of position_ids, transformers' sdpa on
    the whole sequence, all-to-all back), and wraps the dataloader in
    `UlyssesSPDataLoaderAdapter`, which shifts the labels itself (`shift_labels`) and gives rank
    r the contiguous shard [r*S/cp, (r+1)*S/cp) of every tensor of the batch.
  - the loss, `loss="trainer"`: transformers' own `deepspeed_sp_compute_loss`
    (transformers/integrations/deepspeed.py, what `Trainer.compute_loss` calls under DeepSpeed
    SP): the token-weighted mean over the SP group, each rank back-propagating its own share.
    `loss="alst-example"`: the aggregation of accelerate's own ALST test script
    (accelerate/test_utils/scripts/external_deps/test_ds_alst_ulysses_sp.py): each rank's mean
    all-gathered with `torch.distributed.nn.functional.all_gather` (differentiable), weighted by
    the ranks' label counts.
  - the step: DeepSpeed's `engine.backward(loss)` at a gradient-accumulation boundary, which
    reduces the gradients over the sequence-parallel group as ZeRO `zero_stage` does. That is
    what `accelerator.backward` does before `engine.step()`; the step (optimizer update and
    zero_grad) is left out because it would zero the gradients judged. Every parameter's full
    gradient is read with DeepSpeed's `safe_get_full_grad` (ZeRO 1 to 3 keep them partitioned).
  - bf16: DeepSpeed's `bf16: {enabled: true}` with accelerate's mixed_precision "bf16"
    (parameters and activations in bfloat16, gradients reduced in float32 by its optimizer).

Inputs, as a user's collator gives them: every rank's dataloader yields the whole batch
(input_ids, position_ids, UNshifted labels, and the 2-D attention_mask when some token is
padding); the batch is padded at the end to a multiple of cp (the adapter refuses other
lengths). The export's labels are already shifted; the adapter shifts once more, so they are
given unshifted (labels[t + 1] = export label[t]; the export's last label of a row is always
ignored, which is checked).

CPU workarounds (none changes the maths):
  - DS_ACCELERATOR=cpu; DeepSpeed's shared-memory all-reduce op `deepspeed_shm_comm` marked
    not built, as examples/torch-cp/deepspeed_ulysses.py does.
  - the shards the adapter gives are made contiguous: it slices them as views and moves them
    with `.cpu()`, a copy on a GPU but a no-op here, and transformers' ForCausalLMLoss does
    `shift_labels.view(-1)` (loss_utils.py:71), which fails on a non-contiguous view when B > 1.

Refusals, reported as not supported (run returns UNSUPPORTED with the reason):
  - a case transformers cannot express from its inputs (hf_model.unsupported_reason);
  - DeepSpeed's own refusal: Llama4ForCausalLM's attention is not given position_ids, and
    UlyssesSPAttentionHF asserts that they are ("Ulysses SP requires position_ids in every
    forward() call"), so chunked-attention models do not run.

--wrong position-ids-restart-per-shard (a planted CP bug): each rank's position_ids restart at
0 in its shard, as when a user's collator builds them after sharding (DeepSpeed's assertion
names this mistake but cannot see it when position_ids are given): rotary positions of every
rank but 0 are wrong.
"""

import os
import socket
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import cpparity_dump  # noqa: E402  (run.py makes it importable)
import hf_model  # noqa: E402

UNSUPPORTED = 3
LOSSES = ("trainer", "alst-example")
ZERO_STAGES = (0, 1, 2, 3)
WRONG = ("position-ids-restart-per-shard",)
IGNORED_LABEL = cpparity_dump.IGNORED_LABEL
SHARED_MEMORY_OP = "deepspeed_shm_comm"  # DeepSpeed's CPU shared-memory all-reduce, not built
POSITION_IDS_REFUSAL = "Ulysses SP requires position_ids in every forward() call"


def versions():
    """The dump's framework_version: transformers+accelerate+DeepSpeed versions, e.g.
    5.25.0+1.16.0+0.19.8 (its framework is transformers+accelerate+deepspeed)."""
    import accelerate
    import deepspeed
    import transformers
    return f"{transformers.__version__}+{accelerate.__version__}+{deepspeed.__version__}"


def unshifted_labels(labels):
    """Labels the adapter's shift turns back into the export's (already shifted) `labels`."""
    if (labels[:, -1] != IGNORED_LABEL).any():
        raise ValueError("the export's last label of a row is not ignored: the adapter's shift "
                         "would lose it")
    unshifted = torch.full_like(labels, IGNORED_LABEL)
    unshifted[:, 1:] = labels[:, :-1]
    return unshifted


def dataloader_rows(export, padded_len):
    """The batch as a user's dataset gives it: one dict of [S] tensors per row, from
    hf_model.model_inputs (the 2-D attention_mask only when some token is padding), with the
    labels unshifted."""
    inputs = hf_model.model_inputs(export, padded_len)
    batch = {"input_ids": inputs["input_ids"], "position_ids": inputs["position_ids"],
             "labels": unshifted_labels(inputs["shift_labels"])}
    if inputs["attention_mask"] is not None:
        batch["attention_mask"] = inputs["attention_mask"]
    return [{name: value[row] for name, value in batch.items()}
            for row in range(batch["input_ids"].shape[0])]


def alst_example_loss(model, outputs, shift_labels, cp):
    """The loss aggregation of accelerate's test_ds_alst_ulysses_sp.py, line for line."""
    from deepspeed.utils import groups
    loss = model.loss_function(logits=outputs.logits, labels=None, shift_labels=shift_labels,
                               vocab_size=model.config.vocab_size)
    sp_group = groups._get_sequence_parallel_group()
    losses_per_rank = torch.distributed.nn.functional.all_gather(loss, group=sp_group)
    good_tokens = (shift_labels != IGNORED_LABEL).view(-1).sum()
    good_tokens_per_rank = torch.distributed.nn.functional.all_gather(good_tokens, group=sp_group)
    total_loss = sum(losses_per_rank[rank] * good_tokens_per_rank[rank] for rank in range(cp)
                     if good_tokens_per_rank[rank] > 0)
    total_good_tokens = sum(good_tokens_per_rank)
    return total_loss / max(total_good_tokens, 1)


def step(rank, options):
    """One rank's forward, loss and backward; writes its dump. Returns None, or the reason
    DeepSpeed refused the model."""
    import deepspeed.ops
    from accelerate import Accelerator
    from accelerate.utils import DeepSpeedPlugin, ParallelismConfig
    from accelerate.utils.dataclasses import DeepSpeedSequenceParallelConfig
    from deepspeed.utils import safe_get_full_grad
    from transformers.integrations.deepspeed import deepspeed_sp_compute_loss

    cp, bf16 = options["cp"], options["dtype"] == "bf16"
    deepspeed.ops.__compatible_ops__[SHARED_MEMORY_OP] = False  # see the module docstring
    parallelism = ParallelismConfig(
        sp_backend="deepspeed", sp_size=cp,
        sp_handler=DeepSpeedSequenceParallelConfig(sp_seq_length_is_variable=True,
                                                   sp_attn_implementation="sdpa"))
    ds_config = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 1,
                 "zero_optimization": {"stage": options["zero_stage"]},
                 "bf16": {"enabled": bf16}}
    accelerator = Accelerator(mixed_precision="bf16" if bf16 else "no",
                              parallelism_config=parallelism,
                              deepspeed_plugin=DeepSpeedPlugin(hf_ds_config=ds_config))

    export = cpparity_dump.read_export(options["export"])
    model = hf_model.build_model(export, options["model_key"], "sdpa")
    padded_len = export.padded_length(cp, cpparity_dump.LAYOUT_CHUNKS_PER_RANK["contiguous"])
    rows = dataloader_rows(export, padded_len)
    # one copy of the batch per rank: however accelerate deals batches to ranks, each gets the
    # whole batch, and the adapter's first micro-batch is the batch sharded over the SP group
    loader = torch.utils.data.DataLoader(rows * cp, batch_size=len(rows))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # never stepped
    engine, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    # contiguous, as a move to a GPU makes them (see the module docstring)
    batch = {name: value.contiguous() for name, value in next(iter(loader)).items()}
    if options["wrong"] == "position-ids-restart-per-shard":
        batch["position_ids"] = torch.arange(batch["position_ids"].shape[1]).expand_as(
            batch["position_ids"]).contiguous()

    try:
        if cp == 1:  # no SP: no adapter, the model shifts the labels itself
            outputs = engine(**batch)
            loss = outputs.loss
        elif options["loss"] == "trainer":
            loss, outputs = deepspeed_sp_compute_loss(accelerator, engine, batch, True,
                                                      parallelism)
        else:
            outputs = engine(**batch)
            loss = alst_example_loss(model, outputs, batch["shift_labels"], cp)
    except AssertionError as error:
        if POSITION_IDS_REFUSAL in str(error):
            return (f"{type(model).__name__}'s attention is not given position_ids, which "
                    f"DeepSpeed asserts (AssertionError \"{POSITION_IDS_REFUSAL}\", "
                    f"UlyssesSPAttentionHF.forward, deepspeed/runtime/sequence_parallel/"
                    f"ulysses_sp.py)")
        raise
    engine.set_gradient_accumulation_boundary(is_boundary=True)
    engine.backward(loss)

    gradients = hf_model.export_gradients(
        model, export, lambda parameter: safe_get_full_grad(parameter).detach().float())
    kernel = (f"{hf_model.kernel_name(model, 'sdpa')}{'-ulysses' if cp > 1 else ''}-"
              f"zero{options['zero_stage']}-{options['loss']}-loss")
    cpparity_dump.write_rank_dump(
        os.path.join(options["out"], f"rank_{rank}.h5"), export=export, rank=rank, cp=cp,
        token_indices=export.token_indices("contiguous", cp, rank, padded_len),
        loss=loss.detach().float(), logits=outputs.logits.detach().float(), gradients=gradients,
        framework="transformers+accelerate+deepspeed", framework_version=options["versions"],
        dtype=options["dtype"], kernel=kernel)
    return None


def run_rank(rank, options, port):
    """A forked rank: join the gloo group, step, leave; a refusal is written to refused.txt."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE=str(options["cp"]),
                      LOCAL_WORLD_SIZE=str(options["cp"]))
    torch.set_num_threads(1)
    refusal = step(rank, options)
    if refusal and rank == 0:
        with open(os.path.join(options["out"], "refused.txt"), "w") as out:
            out.write(refusal + "\n")
    if dist.is_initialized():
        dist.destroy_process_group()


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(export_path, out_dir, *, cp, model_key, dtype, zero_stage, loss, wrong):
    """Run the cp ranks; 0, or UNSUPPORTED with the reason on stderr (no dump written)."""
    options = {"export": export_path, "out": out_dir, "cp": cp, "model_key": model_key,
               "dtype": dtype, "zero_stage": zero_stage, "loss": loss, "wrong": wrong,
               "versions": versions()}
    os.makedirs(out_dir, exist_ok=True)
    refused = os.path.join(out_dir, "refused.txt")
    if os.path.exists(refused):
        os.remove(refused)
    # fork, not spawn: a spawned rank would import torch, DeepSpeed and transformers again
    mp.start_processes(run_rank, args=(options, free_port()), nprocs=cp, join=True,
                       start_method="fork")
    if os.path.exists(refused):
        with open(refused) as reason:
            print(f"not supported by DeepSpeed's Ulysses SP: {reason.read().strip()}",
                  file=sys.stderr)
        for rank in range(cp):  # no dump of an earlier run in out_dir may pass for this one's
            dump = os.path.join(out_dir, f"rank_{rank}.h5")
            if os.path.exists(dump):
                os.remove(dump)
        return UNSUPPORTED
    return 0
