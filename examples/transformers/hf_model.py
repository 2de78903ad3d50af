"""transformers' own causal LMs loaded with a `cpparity export`'s weights (docs/model.md).

    import hf_model
    model = hf_model.build_model(export, "llama", attn_implementation="sdpa")  # or ministral,
                                                                              # llama4
    reason = hf_model.unsupported_reason(export, "llama")  # None when the class expresses the case
    inputs = hf_model.model_inputs(export, padded_len)      # torch inputs, transformers' way
    loss, logits = hf_model.forward_backward(model, inputs, dtype="f32")
    gradients = hf_model.export_gradients(model, export)   # {export name: gradient}

deepspeed_sp.py runs these models under DeepSpeed's Ulysses sequence parallelism (run.py
--backend hf-deepspeed-sp).

Model classes (MODEL_CLASSES): "llama" LlamaForCausalLM (every layer full_attention), "ministral"
MinistralForCausalLM (full and sliding_attention layers: layer_types with sliding_window, exactly
W keys as docs/masks.md), "llama4" Llama4ForCausalLM, the text-only Llama 4 (full and
chunked_attention layers; rotary on every layer (no_rope_layers all 1), no MoE, no qk-norm, no
attention temperature tuning). Llama 4's rotary pairs neighbouring features (complex,
interleaved) where model.md's pairs feature i with i + Dh/2: q_proj and k_proj rows are permuted
per head on loading and their gradients permuted back; its MLP is named `feed_forward`.

Conventions (docs/model.md, docs/masks.md): the export's labels are already shifted, so they go
to transformers' loss as `shift_labels=` (with `labels=` alone they would be shifted again;
`labels=` is given too, with the same tensor, only because the model computes a loss when labels
is not None and ForCausalLMLoss then uses shift_labels unchanged); the loss
is transformers' mean over the non-ignored labels; pad_token_id stays None (a padding_idx of 0
would zero the gradient of token 0's embedding row, a real token); use_cache False.

Masks: transformers finds packed documents from position_ids only when attention_mask is None
(masking_utils._preprocess_mask_arguments); with a 2-D attention_mask packed documents attend to
each other. So a row set with packed documents is passed without attention_mask, one with
padding with its 2-D mask, and a case with both cannot be expressed (unsupported_reason).
Chunked layers on packed rows count chunks in positions (chunk_origin position): a packed case
whose chunk_origin (row or document) puts other pairs of tokens of a document in one chunk is
not expressible (document equals position when every document starts at position 0); on
unpacked rows the grid starts at the first non-padding token (chunked_overlay's left_padding:
chunk_origin row).
"""

import numpy as np
import torch
import transformers

MODEL_CLASSES = {"llama": "LlamaForCausalLM", "ministral": "MinistralForCausalLM",
                 "llama4": "Llama4ForCausalLM"}
LAYER_TYPES = {"llama": {"full_attention"},
               "ministral": {"full_attention", "sliding_attention"},
               "llama4": {"full_attention", "chunked_attention"}}


def _model_config(export):
    """The export's /model attributes with layer_types a list."""
    model = dict(export.model)
    layer_types = model.get("layer_types")
    if isinstance(layer_types, str):
        layer_types = [layer_types]
    if not layer_types:
        layer_types = ["full_attention"] * int(model["num_hidden_layers"])
    model["layer_types"] = list(layer_types)
    return model


def model_for_case(export):
    """The model class key that expresses the case's layer types: llama, ministral or llama4."""
    types = set(_model_config(export)["layer_types"])
    if "chunked_attention" in types:
        return "llama4"
    if "sliding_attention" in types:
        return "ministral"
    return "llama"


def documents(position_ids):
    """Document ids [B, S] (masks.md: a step other than +1 starts a document), as
    masking_utils.find_packed_sequence_indices computes them."""
    position_ids = np.asarray(position_ids)
    step = np.diff(position_ids, axis=1, prepend=position_ids[:, :1] - 1)
    return np.cumsum(step != 1, axis=1)


def is_packed(document_ids, attention_mask):
    """Whether a row's real tokens (attention_mask 1) lie in more than one document. Padding
    that forms documents of its own does not count: the padding mask masks it as a key, and
    masks.md and transformers agree on it whatever its document."""
    for row, mask in zip(document_ids, attention_mask):
        real = row[mask != 0]
        if real.size and (real != real[0]).any():
            return True
    return False


def unsupported_reason(export, model_key):
    """None when `model_key`'s class computes the case's mask from its inputs, else why not."""
    config = _model_config(export)
    extra = set(config["layer_types"]) - LAYER_TYPES[model_key]
    if extra:
        return (f"{MODEL_CLASSES[model_key]} has no {', '.join(sorted(extra))} layers")
    inputs = export.inputs
    padded = bool((inputs["attention_mask"] == 0).any())
    document_ids = documents(inputs["position_ids"])
    packed = is_packed(document_ids, inputs["attention_mask"])
    if padded and packed:
        return ("padding and packed documents together: transformers finds packed documents "
                "from position_ids only when attention_mask is None "
                "(masking_utils._preprocess_mask_arguments); with the 2-D padding mask packed "
                "documents would attend to each other")
    if packed and "chunked_attention" in config["layer_types"]:
        origin = config.get("chunk_origin", "row")
        if not _chunk_grids_agree(inputs["position_ids"], document_ids,
                                  int(config["attention_chunk_size"]), origin):
            return (f"chunk_origin {origin} on packed rows where it differs from counting "
                    f"chunks in position_ids, which transformers does for packed rows "
                    f"(masking_utils: chunks remapped from the positions; chunk_origin "
                    f"position)")
    return None


def _chunk_grids_agree(position_ids, document_ids, chunk_size, origin):
    """Whether, in every document of these unpadded rows, masks.md's chunk grid of `origin`
    (row: from the row's first index; document: from the document's first token; position:
    from position_ids) puts the same pairs of tokens in one chunk as the position grid."""
    for positions, documents_of_row in zip(position_ids, document_ids):
        index = np.arange(positions.size)
        if origin == "row":
            coordinate = index
        elif origin == "document":
            first = {document: np.flatnonzero(documents_of_row == document)[0]
                     for document in np.unique(documents_of_row)}
            coordinate = index - np.array([first[d] for d in documents_of_row])
        else:
            coordinate = positions
        same_document = documents_of_row[:, None] == documents_of_row[None, :]
        ours = (coordinate[:, None] // chunk_size) == (coordinate[None, :] // chunk_size)
        theirs = (positions[:, None] // chunk_size) == (positions[None, :] // chunk_size)
        if (same_document & (ours != theirs)).any():
            return False
    return True


def _interleave_permutation(heads, head_dim):
    """Row order that turns model.md's half-split rotary rows into Llama 4's interleaved ones:
    per head, new row 2i is old row i and new row 2i+1 is old row i + Dh/2."""
    half = head_dim // 2
    within = np.stack([np.arange(half), np.arange(half) + half], axis=1).reshape(-1)
    return np.concatenate([head * head_dim + within for head in range(heads)])


def _parameter_map(export, model_key):
    """{export name: (transformers name, row permutation or None)}."""
    config = _model_config(export)
    mapping = {}
    for name in export.parameter_names:
        target, permutation = name, None
        if model_key == "llama4":
            target = name.replace(".mlp.", ".feed_forward.")
            head_dim = int(config["head_dim"])
            if name.endswith("self_attn.q_proj.weight"):
                permutation = _interleave_permutation(int(config["num_attention_heads"]), head_dim)
            elif name.endswith("self_attn.k_proj.weight"):
                permutation = _interleave_permutation(int(config["num_key_value_heads"]),
                                                      head_dim)
        mapping[name] = (target, permutation)
    return mapping


def _transformers_config(export, model_key, attn_implementation):
    config = _model_config(export)
    common = dict(
        vocab_size=int(config["vocab_size"]), hidden_size=int(config["hidden_size"]),
        num_hidden_layers=int(config["num_hidden_layers"]),
        num_attention_heads=int(config["num_attention_heads"]),
        num_key_value_heads=int(config["num_key_value_heads"]),
        head_dim=int(config["head_dim"]), intermediate_size=int(config["intermediate_size"]),
        rms_norm_eps=float(config["rms_norm_eps"]),
        rope_parameters={"rope_type": "default", "rope_theta": float(config["rope_theta"])},
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        pad_token_id=None, bos_token_id=None, eos_token_id=None, use_cache=False,
        attention_bias=False, mlp_bias=False, attention_dropout=0.0,
        attn_implementation=attn_implementation)
    if model_key == "llama":
        return transformers.LlamaConfig(**common)
    if model_key == "ministral":
        return transformers.MinistralConfig(
            **common, layer_types=config["layer_types"],
            sliding_window=int(config.get("sliding_window") or 0) or None)
    layers = int(config["num_hidden_layers"])
    common.pop("mlp_bias")
    return transformers.Llama4TextConfig(
        **common, intermediate_size_mlp=int(config["intermediate_size"]),
        layer_types=config["layer_types"], no_rope_layers=[1] * layers, moe_layers=[],
        use_qk_norm=False, attn_temperature_tuning=False,
        attention_chunk_size=int(config.get("attention_chunk_size") or 1))


def build_model(export, model_key, attn_implementation="sdpa"):
    """`model_key`'s transformers model with the export's weights (strict load_state_dict),
    float32 parameters, train mode (no dropout in these configs)."""
    config = _transformers_config(export, model_key, attn_implementation)
    model_class = getattr(transformers, MODEL_CLASSES[model_key])
    model = model_class(config).to(torch.float32)
    state = {}
    for name, (target, permutation) in _parameter_map(export, model_key).items():
        weight = export.weights[name]
        if permutation is not None:
            weight = weight[permutation]
        state[target] = torch.as_tensor(np.ascontiguousarray(weight), dtype=torch.float32)
    if config.tie_word_embeddings:  # the state dict names the tied head too: the same tensor
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    model.load_state_dict(state, strict=True)
    model.hf_model_key = model_key
    model.train()
    return model


def model_inputs(export, padded_len=None):
    """The torch inputs of transformers' forward for the whole (padded) batch: input_ids,
    position_ids, shift_labels, and attention_mask (the 2-D mask, or None when no token is
    padding: then packed documents are found from position_ids)."""
    arrays = export.pad_inputs(padded_len or export.seq_len)
    tensors = {name: torch.as_tensor(value, dtype=torch.int64) for name, value in arrays.items()}
    mask = tensors["attention_mask"]
    padded = bool((export.inputs["attention_mask"] == 0).any())
    return {"input_ids": tensors["input_ids"], "position_ids": tensors["position_ids"],
            "attention_mask": mask if padded else None, "shift_labels": tensors["labels"]}


def forward_backward(model, inputs, dtype="f32"):
    """One forward and backward of transformers' model on `inputs` (model_inputs' keys).

    dtype "bf16": the parameters rounded to bfloat16 (kept float32 as master weights) and the
    forward under torch.autocast("cpu", bfloat16), transformers' usual bf16 mixed precision.
    Returns (loss, logits) with float32 logits; the gradients are in the parameters' .grad.
    """
    if dtype == "bf16":
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(parameter.to(torch.bfloat16).to(torch.float32))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
        output = model(input_ids=inputs["input_ids"], position_ids=inputs["position_ids"],
                       attention_mask=inputs["attention_mask"],
                       labels=inputs["shift_labels"], shift_labels=inputs["shift_labels"],
                       use_cache=False)
    output.loss.backward()
    return output.loss.detach().float(), output.logits.detach().float()


def export_gradients(model, export, gradient_of=lambda parameter: parameter.grad):
    """Every parameter's gradient under the export's names, Llama 4's q/k rows permuted back.
    `gradient_of(parameter)` reads one (default its .grad; DeepSpeed's ZeRO needs its own)."""
    parameters = dict(model.named_parameters())
    gradients = {}
    for name, (target, permutation) in _parameter_map(export, model.hf_model_key).items():
        gradient = gradient_of(parameters[target])
        if permutation is not None:
            restored = torch.empty_like(gradient)
            restored[torch.as_tensor(permutation)] = gradient
            gradient = restored
        gradients[name] = gradient
    return gradients


def kernel_name(model, attn_implementation):
    """The dump's kernel: e.g. LlamaForCausalLM-sdpa."""
    return f"{type(model).__name__}-{attn_implementation}"


VERSION = transformers.__version__
