"""The tiny Llama-style decoder of docs/model.md in PyTorch, with pluggable attention.

The module tree mirrors Hugging Face's Llama, so `named_parameters()` yields exactly model.md's
names (`model.layers.0.self_attn.q_proj.weight`, ...) and the weights of a `cpparity export`
load by name. The model itself knows nothing about context parallelism: every layer calls
`attention(q, k, v, layer_type)` on the tokens this process holds, and the context-parallel
code (ulysses.py) supplies that function.

Also here, because every CP scheme needs them on the global sequence: the document ids, the
dense boolean masks and the shifted labels of docs/masks.md, and an eager masked-softmax
attention kernel.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

IGNORED_LABEL = -100
LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention")


class Config:
    """model.md's configuration, read from an export's /model attributes (a dict)."""

    def __init__(self, attributes):
        self.vocab_size = int(attributes["vocab_size"])
        self.hidden_size = int(attributes["hidden_size"])
        self.num_hidden_layers = int(attributes["num_hidden_layers"])
        self.num_attention_heads = int(attributes["num_attention_heads"])
        self.num_key_value_heads = int(attributes["num_key_value_heads"])
        self.head_dim = int(attributes["head_dim"])
        self.intermediate_size = int(attributes["intermediate_size"])
        self.rms_norm_eps = float(attributes["rms_norm_eps"])
        self.rope_theta = float(attributes["rope_theta"])
        self.layer_types = list(attributes["layer_types"])
        self.sliding_window = int(attributes["sliding_window"])
        self.attention_chunk_size = int(attributes["attention_chunk_size"])
        self.chunk_origin = str(attributes.get("chunk_origin", "row"))
        self.tie_word_embeddings = bool(int(attributes.get("tie_word_embeddings", 0)))
        for layer_type in self.layer_types:
            if layer_type not in LAYER_TYPES:
                raise ValueError(f"layer type {layer_type!r}: expected one of {LAYER_TYPES}")


# --- masks and labels on the global sequence (docs/masks.md) -----------------------------------

def document_ids(position_ids):
    """[B, S] document ids: a new document wherever the position step is not +1."""
    starts = torch.ones_like(position_ids, dtype=torch.bool)
    starts[:, 1:] = position_ids[:, 1:] - position_ids[:, :-1] != 1
    return torch.cumsum(starts.to(torch.int64), dim=1) - 1


def build_masks(attention_mask, documents, config, position_ids=None):
    """{layer type: allowed [B, S, S] bool} from masks.md's predicate on the whole row.

    attention_mask, documents ([B, S], documents as from `document_ids`) and position_ids (read
    by `chunk_origin: position` only) must cover the global sequence: a mask rebuilt from one
    shard alone splits documents and chunks.
    """
    seq_len = attention_mask.shape[1]
    index = torch.arange(seq_len)
    query, key = index[:, None], index[None, :]
    allowed = ((key <= query)[None]
               & (attention_mask == 1)[:, None, :]
               & (documents[:, :, None] == documents[:, None, :]))
    if config.chunk_origin == "position":
        # chunks counted in position_ids (transformers' packed rows); documents stay apart above
        chunk = torch.div(position_ids, config.attention_chunk_size, rounding_mode="floor")
    else:
        if config.chunk_origin == "row":
            # the grid starts after the left padding: lp = the number of leading zeros
            origin = (torch.cumsum(attention_mask, dim=1) == 0).sum(dim=1, keepdim=True)
        else:
            # the grid starts at each document's first token
            is_start = torch.ones_like(documents, dtype=torch.bool)
            is_start[:, 1:] = documents[:, 1:] != documents[:, :-1]
            origin = torch.cummax(torch.where(is_start, index, torch.zeros_like(index)),
                                  dim=1).values
        chunk = torch.div(index[None] - origin, config.attention_chunk_size,
                          rounding_mode="floor")
    return {
        "full_attention": allowed,
        "sliding_attention": allowed & (key > query - config.sliding_window)[None],
        "chunked_attention": allowed & (chunk[:, :, None] == chunk[:, None, :]),
    }


def shifted_labels(input_ids, attention_mask, position_ids):
    """Labels [B, S]: the next token where it is a real token of the same document, else -100.

    Correct only on the whole sequence: on a shard it drops the target across the boundary.
    """
    documents = document_ids(position_ids)
    keep = ((attention_mask[:, :-1] == 1) & (attention_mask[:, 1:] == 1)
            & (documents[:, :-1] == documents[:, 1:]))
    labels = torch.full_like(input_ids, IGNORED_LABEL)
    labels[:, :-1] = torch.where(keep, input_ids[:, 1:], labels[:, :-1])
    return labels


def masked_softmax_attention(q, k, v, allowed):
    """Eager attention: q, k, v [B, S, h, Dh], allowed [B, S, S] bool -> [B, S, h, Dh].

    k and v have as many heads as q. A query row with no allowed key gives exactly 0 (masks.md,
    fully masked rows), with no NaN in the forward or the backward.
    """
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, h, S, Dh]
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    allowed = allowed[:, None]
    has_key = allowed.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(torch.where(has_key, scores, torch.zeros_like(scores)), dim=-1)
    probs = torch.where(has_key, probs, torch.zeros_like(probs))
    return torch.matmul(probs, v).transpose(1, 2)


class RoundToBfloat16(torch.autograd.Function):
    """Store a float32 value as bfloat16 (round to nearest even), keep computing in float32.

    The backward passes the gradient through unrounded: in model.md's bf16 every activation
    gradient and every parameter gradient stays float32.
    """

    @staticmethod
    def forward(ctx, x):
        return x.to(torch.bfloat16).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad


def store_as(dtype):
    """The function applied wherever model.md's bf16 stores a value: rounding, or nothing."""
    if dtype == "bf16":
        return RoundToBfloat16.apply
    if dtype == "f32":
        return lambda x: x
    raise ValueError(f"dtype {dtype!r}: expected 'f32' or 'bf16'")


def repeat_kv(x, groups):
    """[B, S, Hkv, Dh] -> [B, S, Hkv * groups, Dh]: query head j uses kv head j // groups."""
    return x.repeat_interleave(groups, dim=2)


# --- the model --------------------------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        return self.weight * x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)


def rotary(x, position_ids, theta):
    """RoPE, non-interleaved halves: x [B, L, h, Dh], position_ids [B, L] (global positions)."""
    head_dim = x.shape[-1]
    inv_freq = theta ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    angle = position_ids.to(torch.float64)[:, :, None] * inv_freq
    angle = torch.cat([angle, angle], dim=-1)[:, :, None, :]
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    half = head_dim // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class SelfAttention(nn.Module):
    def __init__(self, config, store):
        super().__init__()
        self.config = config
        self.store = store
        heads, kv_heads, head_dim = (config.num_attention_heads, config.num_key_value_heads,
                                     config.head_dim)
        self.q_proj = nn.Linear(config.hidden_size, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, config.hidden_size, bias=False)

    def forward(self, h, position_ids, layer_type, attention):
        batch, length = h.shape[:2]
        config = self.config
        store = self.store
        q = store(self.q_proj(h)).view(batch, length, config.num_attention_heads, config.head_dim)
        k = store(self.k_proj(h)).view(batch, length, config.num_key_value_heads, config.head_dim)
        v = store(self.v_proj(h)).view(batch, length, config.num_key_value_heads, config.head_dim)
        q = store(rotary(q, position_ids, config.rope_theta))
        k = store(rotary(k, position_ids, config.rope_theta))
        out = store(attention(q, k, v, layer_type))
        return store(self.o_proj(out.reshape(batch, length, -1)))


class MLP(nn.Module):
    def __init__(self, config, store):
        super().__init__()
        self.store = store
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, h):
        store = self.store
        product = store(F.silu(store(self.gate_proj(h))) * store(self.up_proj(h)))
        return store(self.down_proj(product))


class DecoderLayer(nn.Module):
    def __init__(self, config, layer_type, store):
        super().__init__()
        self.layer_type = layer_type
        self.store = store
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = SelfAttention(config, store)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = MLP(config, store)

    def forward(self, x, position_ids, attention):
        store = self.store
        h = store(self.input_layernorm(x))
        x = store(x + self.self_attn(h, position_ids, self.layer_type, attention))
        return store(x + self.mlp(store(self.post_attention_layernorm(x))))


class DecoderModel(nn.Module):
    def __init__(self, config, store):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, layer_type, store)
                                    for layer_type in config.layer_types)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class CausalLM(nn.Module):
    """model.md's model; `forward` returns the logits of the tokens given.

    Parameters and arithmetic are float32. dtype "bf16" is model.md's mixed precision: the
    parameters and every stored activation rounded to bfloat16, gradients float32.
    """

    def __init__(self, config, dtype="f32"):
        super().__init__()
        self.config = config
        self.store = store_as(dtype)
        self.model = DecoderModel(config, self.store)
        if not config.tie_word_embeddings:
            self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def load_weights(self, weights):
        """Copy {model.md name: array} into the parameters; every name exactly once."""
        own = dict(self.named_parameters())
        if set(own) != set(weights):
            raise ValueError(f"weights do not match the model: missing "
                             f"{sorted(set(own) - set(weights))}, extra "
                             f"{sorted(set(weights) - set(own))}")
        with torch.no_grad():
            for name, value in weights.items():
                own[name].copy_(self.store(torch.as_tensor(value, dtype=torch.float32)))

    def forward(self, input_ids, position_ids, attention):
        """input_ids, position_ids [B, L] -> logits [B, L, V].

        attention(q [B, L, H, Dh], k, v [B, L, Hkv, Dh], layer_type) -> [B, L, H, Dh] sees the
        same L tokens; whatever it needs of the other tokens is its business.
        """
        x = self.model.embed_tokens(input_ids)
        for layer in self.model.layers:
            x = layer(x, position_ids, attention)
        x = self.store(self.model.norm(x))
        head = (self.model.embed_tokens.weight if self.config.tie_word_embeddings
                else self.lm_head.weight)
        return self.store(torch.matmul(x, head.t()))


def summed_cross_entropy(logits, labels):
    """Σ cross-entropy over labels != -100 (the loss's numerator, masks.md)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=IGNORED_LABEL, reduction="sum")
