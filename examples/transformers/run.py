"""Run transformers' own causal LM (hf_model.py) on a `cpparity export`, one dump per rank.

    run.py EXPORT.h5 --out DIR [--backend transformers|hf-deepspeed-sp] [--cp N]
           [--model llama|ministral|llama4] [--dtype f32|bf16] [--attn sdpa|eager]
           [--zero-stage 0|1|2|3] [--loss trainer|alst-example] [--wrong NAME]

--backend transformers (the default): cp 1, one process, the whole batch through transformers'
forward and backward; DIR/rank_0.h5 holds the logits of every position, transformers' loss and
every parameter's gradient under the export's names (framework "transformers", kernel e.g.
"LlamaForCausalLM-sdpa").

--backend hf-deepspeed-sp: the same model under DeepSpeed's Ulysses sequence parallelism for
HF models (UlyssesSPAttentionHF), set up by accelerate's ParallelismConfig(sp_backend=
"deepspeed", sp_size=cp) on cp gloo CPU processes, attention sdpa (deepspeed_sp.py says what is
judged); DIR/rank_<r>.h5 holds rank r's contiguous shard of the logits. --zero-stage picks
DeepSpeed's ZeRO stage (default 0). --loss picks how the ranks' losses are combined: trainer
(default; transformers' deepspeed_sp_compute_loss, what its Trainer does) or alst-example (the
all-gather aggregation of accelerate's own ALST test script).

--model defaults to the class that expresses the case's layer types (hf_model.model_for_case).
A case the class cannot express (hf_model.unsupported_reason), or one DeepSpeed refuses, is not
run: exit 3 and the reason on stderr.

--wrong plants a bug the judge must fail:
  labels-shifted-twice            (transformers) the export's already shifted labels passed as
                                  labels= instead of shift_labels=, so transformers shifts
                                  them once more
  position-ids-restart-per-shard  (hf-deepspeed-sp) each rank's position_ids restart at 0 in
                                  its shard: every rank but 0 rotates q and k by wrong positions
"""

import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:  # the package installed into this python (pip install ./python)
    import cpparity_dump
except ImportError:  # else the package's folder of this clone
    sys.path.append(os.path.join(HERE, "..", "..", "python"))
    import cpparity_dump

import deepspeed_sp  # noqa: E402  (imports DeepSpeed only when it runs)
import hf_model  # noqa: E402

UNSUPPORTED_EXIT = deepspeed_sp.UNSUPPORTED  # one exit code for both backends
BACKEND_WRONG = {"transformers": ("labels-shifted-twice",),
                 "hf-deepspeed-sp": deepspeed_sp.WRONG}
WRONG = tuple(name for names in BACKEND_WRONG.values() for name in names)


def parse_arguments(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("export", help="a `cpparity export` file")
    parser.add_argument("--out", required=True, help="directory for rank_<r>.h5 (created)")
    parser.add_argument("--backend", choices=tuple(BACKEND_WRONG), default="transformers")
    parser.add_argument("--cp", type=int, default=1, help="number of ranks (1 for transformers)")
    parser.add_argument("--zero-stage", type=int, choices=deepspeed_sp.ZERO_STAGES, default=0,
                        help="DeepSpeed's ZeRO stage (hf-deepspeed-sp; default 0)")
    parser.add_argument("--loss", choices=deepspeed_sp.LOSSES, default="trainer",
                        help="how the SP ranks' losses are combined (hf-deepspeed-sp)")
    parser.add_argument("--model", choices=tuple(hf_model.MODEL_CLASSES),
                        help="the transformers class (default: the one the case needs)")
    parser.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    parser.add_argument("--attn", choices=("sdpa", "eager"), default="sdpa",
                        help="transformers' attn_implementation (default sdpa)")
    parser.add_argument("--wrong", choices=WRONG, help="plant a bug (see above)")
    args = parser.parse_args(argv)
    if args.backend == "transformers" and args.cp != 1:
        parser.error("--backend transformers runs at --cp 1 only")
    if args.cp < 1:
        parser.error(f"--cp {args.cp}: expected >= 1")
    if args.wrong and args.wrong not in BACKEND_WRONG[args.backend]:
        parser.error(f"--wrong {args.wrong} is a bug of --backend "
                     f"{next(b for b, names in BACKEND_WRONG.items() if args.wrong in names)}")
    if args.backend == "transformers" and (args.zero_stage or args.loss != "trainer"):
        parser.error("--zero-stage and --loss are options of --backend hf-deepspeed-sp")
    if args.backend == "hf-deepspeed-sp" and args.attn != "sdpa":
        parser.error("--backend hf-deepspeed-sp runs sdpa only (DeepSpeed refuses eager: it "
                     "needs the 4-D mask the wrapper discards)")
    return args


def main(argv=None):
    args = parse_arguments(argv)
    torch.set_num_threads(1)
    export = cpparity_dump.read_export(args.export)
    model_key = args.model or hf_model.model_for_case(export)
    reason = hf_model.unsupported_reason(export, model_key)
    if reason:
        print(f"not supported by {hf_model.MODEL_CLASSES[model_key]}: {reason}", file=sys.stderr)
        return UNSUPPORTED_EXIT
    if args.backend == "hf-deepspeed-sp":
        return deepspeed_sp.run(args.export, args.out, cp=args.cp, model_key=model_key,
                                dtype=args.dtype, zero_stage=args.zero_stage, loss=args.loss,
                                wrong=args.wrong)
    model = hf_model.build_model(export, model_key, args.attn)
    inputs = hf_model.model_inputs(export)
    if args.wrong == "labels-shifted-twice":
        inputs["labels"] = inputs.pop("shift_labels")
        loss, logits = _forward_backward_with_labels(model, inputs, args.dtype)
    else:
        loss, logits = hf_model.forward_backward(model, inputs, args.dtype)
    os.makedirs(args.out, exist_ok=True)
    cpparity_dump.write_rank_dump(
        os.path.join(args.out, "rank_0.h5"), export=export, rank=0, cp=1,
        token_indices=export.token_indices("contiguous", 1, 0), loss=loss, logits=logits,
        gradients=hf_model.export_gradients(model, export), framework="transformers",
        framework_version=hf_model.VERSION, dtype=args.dtype,
        kernel=hf_model.kernel_name(model, args.attn))
    return 0


def _forward_backward_with_labels(model, inputs, dtype):
    """The planted bug: the shifted labels given as labels=, transformers shifts them again."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
        output = model(input_ids=inputs["input_ids"], position_ids=inputs["position_ids"],
                       attention_mask=inputs["attention_mask"], labels=inputs["labels"],
                       use_cache=False)
    output.loss.backward()
    return output.loss.detach().float(), output.logits.detach().float()


if __name__ == "__main__":
    sys.exit(main())
