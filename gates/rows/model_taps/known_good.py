"""A known-good decoder-taps (spec/model-taps.md; docs/gate-files.md, "Known-goods"): a legitimate port of the same
decoder that rounds and sums otherwise than the Python port, which the gates of the row must pass.

``decoder_taps_reordered`` computes every rank in one process (no gloo world), as a port on one device that splits
its work as the ranks would:

- every matmul blocked: the contraction accumulated in float32, BLOCK terms at a time, rounded once to the compute
  dtype (torch's CPU kernel sums in its own order);
- the attention (scores, causal softmax, the weighted sum of V) in float64, rounded once to the compute dtype (the
  port rounds the probabilities to the compute dtype before the product with V);
- RMSNorm in float32 rounded once, its weight multiplied in float32 (the port rounds the scaled row first);
- RoPE from a float64 table rounded once to float32 (the port's table is torch's float32 pow), the rotation in float32;
- o_proj and down_proj as tp partials over the ranks' query heads and ffn units, summed in reverse rank order, each
  running sum rounded to the compute dtype (a ring that starts at the last rank); the partials are the taps of
  MT-1.6 when asked.

It imports neither the port nor the oracle: its inputs are checked here, with the messages the operation names
(gates/rows/model_taps/operations.yaml), in the port's order (config, weights, ids, tp, dtype, feed, rank_partials).
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping

import numpy as np
import torch

BLOCK = 16
"""The blocked matmul's step along the contraction."""
MAX_TP = 8
VOCAB_PADDING = 64
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
INTS = ("layers", "hidden", "num_heads", "num_kv_heads", "head_dim", "ffn", "vocab", "max_position")
FIELDS = (*INTS, "tie_word_embeddings", "rms_norm_eps", "rope_theta")
FEED_POINTS = "layers.{i}.attn.in, layers.{i}.mlp.in, norm.in"
LAYER_FEED = re.compile(r"layers\.(0|[1-9][0-9]*)\.(attn|mlp)\.in")


# Inputs ---------------------------------------------------------------------------------------------------------


def _config(config: Any) -> dict[str, Any]:
    """The config's fields, each of its kind (no attention biases: a port of the bias-free Qwen3 checkpoint)."""
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping of {', '.join(FIELDS)}; got {type(config).__name__}")
    unknown = [name for name in config if name not in FIELDS]
    if unknown:
        raise ValueError(f"config has an unknown field {unknown[0]!r}; fields: {', '.join(FIELDS)}")
    missing = [name for name in FIELDS if name not in config]
    if missing:
        raise ValueError(f"config.{missing[0]} is missing; fields: {', '.join(FIELDS)}")
    for name in INTS:
        value = config[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"config.{name} must be an int >= 1, got {value!r}")
    if config["head_dim"] % 2:
        raise ValueError(f"config.head_dim={config['head_dim']} must be even (neox RoPE rotates pairs)")
    if not isinstance(config["tie_word_embeddings"], bool):
        raise TypeError(f"config.tie_word_embeddings must be a bool, got {config['tie_word_embeddings']!r}")
    for name, low in (("rms_norm_eps", 0.0), ("rope_theta", 1.0)):
        value = config[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
            raise ValueError(f"config.{name} must be a finite number >= {low:g}, got {value!r}")
    return dict(config)


def _shapes(c: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every tensor of the checkpoint and its shape, lm_head only when untied."""
    hidden, q, kv = c["hidden"], c["num_heads"] * c["head_dim"], c["num_kv_heads"] * c["head_dim"]
    layer = {"input_layernorm.weight": (hidden,), "self_attn.q_proj.weight": (q, hidden),
             "self_attn.k_proj.weight": (kv, hidden), "self_attn.v_proj.weight": (kv, hidden),
             "self_attn.o_proj.weight": (hidden, q), "self_attn.q_norm.weight": (c["head_dim"],),
             "self_attn.k_norm.weight": (c["head_dim"],), "post_attention_layernorm.weight": (hidden,),
             "mlp.gate_proj.weight": (c["ffn"], hidden), "mlp.up_proj.weight": (c["ffn"], hidden),
             "mlp.down_proj.weight": (hidden, c["ffn"])}
    shapes = {"model.embed_tokens.weight": (c["vocab"], hidden)}
    for index in range(c["layers"]):
        shapes.update({f"model.layers.{index}.{name}": shape for name, shape in layer.items()})
    shapes["model.norm.weight"] = (hidden,)
    if not c["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (c["vocab"], hidden)
    return shapes


def _array(where: str, value: Any) -> np.ndarray:
    """A tensor input as a numpy array of its own dtype (a torch bfloat16 one as ml_dtypes.bfloat16, bit for bit)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            import ml_dtypes

            return value.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return value.numpy()
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{where} must be a tensor, got {type(value).__name__}")
    return value


def _weights(c: Mapping[str, Any], weights: Any) -> dict[str, np.ndarray]:
    """The float32 weights, every name the config's with its shape."""
    if not isinstance(weights, Mapping):
        raise TypeError(f"weights must be a mapping of HF tensor names to tensors, got {type(weights).__name__}")
    shapes = _shapes(c)
    unknown = [name for name in weights if name not in shapes]
    if unknown:
        raise ValueError(f"weights has an unknown tensor {unknown[0]!r}")
    missing = [name for name in shapes if name not in weights]
    if missing:
        raise ValueError(f"weights is missing {missing[0]!r} (shape {list(shapes[missing[0]])})")
    checked = {}
    for name, shape in shapes.items():
        value = _array(f"weights[{name!r}]", weights[name])
        if tuple(value.shape) != shape:
            raise ValueError(f"weights[{name!r}] has shape {list(value.shape)}, expected {list(shape)}")
        if value.dtype != np.float32:
            raise ValueError(f"weights[{name!r}] has dtype {value.dtype.name}; accepted: float32")
        checked[name] = value
    return checked


def _ids(c: Mapping[str, Any], ids: Any) -> np.ndarray:
    value = _array("ids", ids)
    if value.dtype != np.int64 or value.ndim != 1 or value.shape[0] < 1:
        raise ValueError(f"ids must be a non-empty int64 tensor [n], got {value.dtype.name} of shape {list(value.shape)}")
    outside = np.flatnonzero((value < 0) | (value >= c["vocab"]))
    if outside.size:
        raise ValueError(f"ids[{outside[0]}] = {int(value[outside[0]])} is outside [0, vocab={c['vocab']})")
    if value.shape[0] > c["max_position"]:
        raise ValueError(f"ids holds {value.shape[0]} tokens, beyond config.max_position={c['max_position']}")
    return value


def _tp(c: Mapping[str, Any], tp: Any) -> int:
    """tp in [1, MAX_TP], a split of the query heads, KV heads, ffn and padded vocabulary vLLM makes."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ValueError(f"tp must be an int >= 1, got {tp!r}")
    if tp > MAX_TP:
        raise ValueError(f"tp={tp} is more than the {MAX_TP} ranks a gloo world here may have")
    heads, kv = c["num_heads"], c["num_kv_heads"]
    if heads % tp:
        raise ValueError(f"num_heads={heads} is not divisible by tp={tp}")
    if tp >= kv and tp % kv:
        raise ValueError(f"num_kv_heads={kv} does not divide tp={tp} (tp >= num_kv_heads replicates each KV head "
                         f"tp/num_kv_heads times)")
    if tp < kv and kv % tp:
        raise ValueError(f"num_kv_heads={kv} is not divisible by tp={tp}")
    if heads % kv:
        raise ValueError(f"num_heads={heads} is not divisible by num_kv_heads={kv} (grouped-query attention)")
    if c["ffn"] % tp:
        raise ValueError(f"ffn={c['ffn']} is not divisible by tp={tp}")
    padded = -(-c["vocab"] // VOCAB_PADDING) * VOCAB_PADDING
    if padded % tp:
        raise ValueError(f"the padded vocab {padded} is not divisible by tp={tp}")
    return tp


def _dtype(dtype: Any) -> torch.dtype:
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return DTYPES[dtype]


def _feed(c: Mapping[str, Any], feed: Any, tokens: int) -> dict[str, np.ndarray]:
    """The fed arrays in float64 (exact for every float dtype), each a feed point's [tokens, hidden]."""
    if feed is None:
        return {}
    if not isinstance(feed, Mapping):
        raise TypeError(f"feed must be a mapping of feed points to [T, hidden] tensors, got {type(feed).__name__}")
    checked = {}
    for name, value in feed.items():
        found = LAYER_FEED.fullmatch(name) if isinstance(name, str) else None
        if name != "norm.in" and (found is None or int(found.group(1)) >= c["layers"]):
            raise ValueError(f"feed[{name!r}] is not a feed point of this {c['layers']}-layer model; feed points: "
                             f"{FEED_POINTS} with i in [0, {c['layers']})")
        array = _array(f"feed[{name!r}]", value)
        if array.dtype.kind != "f" and array.dtype.name != "bfloat16":
            raise TypeError(f"feed[{name!r}] has dtype {array.dtype.name}; a float dtype is needed")
        expected = [tokens, c["hidden"]]
        if list(array.shape) != expected:
            raise ValueError(f"feed[{name!r}] has shape {list(array.shape)}, expected {expected} ([T, hidden])")
        checked[name] = array.astype(np.float64)
    return checked


# The forward ----------------------------------------------------------------------------------------------------


def _matmul(x: torch.Tensor, weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x @ weight^T accumulated in float32, BLOCK contraction terms at a time, rounded to ``dtype`` once."""
    total = torch.zeros(x.shape[0], weight.shape[0], dtype=torch.float32)
    for start in range(0, x.shape[1], BLOCK):
        total += x[:, start:start + BLOCK].float() @ weight[:, start:start + BLOCK].float().T
    return total.to(dtype)


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x²) + eps) · weight in float32, rounded to x's dtype once."""
    wide = x.float()
    return (wide * torch.rsqrt(wide.square().mean(dim=-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def _rope(x: torch.Tensor, head_dim: int, theta: float) -> torch.Tensor:
    """x [tokens, heads, head_dim] rotated by neox pairs (j, j + head_dim/2) on a float64 table rounded to float32."""
    half = head_dim // 2
    angles = np.arange(x.shape[0], dtype=np.float64)[:, None] * theta ** (-np.arange(half) * 2.0 / head_dim)
    cos = torch.from_numpy(np.cos(angles).astype(np.float32))[:, None, :]
    sin = torch.from_numpy(np.sin(angles).astype(np.float32))[:, None, :]
    first, second = x[..., :half].float(), x[..., half:].float()
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1).to(x.dtype)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal grouped-query attention in float64, rounded once to q's dtype: [tokens, heads * head_dim]."""
    tokens, heads, head_dim = q.shape
    group = heads // k.shape[1]
    wide_k = k.double().repeat_interleave(group, dim=1).transpose(0, 1)
    wide_v = v.double().repeat_interleave(group, dim=1).transpose(0, 1)
    scores = q.double().transpose(0, 1) @ wide_k.transpose(1, 2) / math.sqrt(head_dim)
    future = torch.ones(tokens, tokens, dtype=torch.bool).triu(1)
    out = scores.masked_fill(future, float("-inf")).softmax(dim=-1) @ wide_v
    return out.transpose(0, 1).reshape(tokens, heads * head_dim).to(q.dtype)


def _reduced(taps: dict[str, torch.Tensor] | None, name: str, x: torch.Tensor, weight: torch.Tensor, units: int,
             tp: int, dtype: torch.dtype) -> torch.Tensor:
    """A row-parallel product: each rank's partial over its ``units`` consecutive contraction columns, recorded as
    ``name.rank{r}`` when ``taps`` is given, summed from the last rank to the first in ``dtype``."""
    width = units * (x.shape[1] // (units * tp))
    partials = [_matmul(x[:, r * width:(r + 1) * width], weight[:, r * width:(r + 1) * width], dtype)
                for r in range(tp)]
    if taps is not None:
        taps.update({f"{name}.rank{r}": partial for r, partial in enumerate(partials)})
    total = partials[-1]
    for partial in reversed(partials[:-1]):
        total = total + partial
    return total


def _forward(c: Mapping[str, Any], w: Mapping[str, torch.Tensor], ids: np.ndarray, feed: Mapping[str, np.ndarray],
             tp: int, dtype: torch.dtype, rank_partials: bool) -> dict[str, torch.Tensor]:
    taps: dict[str, torch.Tensor] = {}
    partials = taps if rank_partials else None
    heads, kv_heads, head_dim = c["num_heads"], c["num_kv_heads"], c["head_dim"]
    eps, theta, tokens = float(c["rms_norm_eps"]), float(c["rope_theta"]), ids.shape[0]

    def fed(name: str, stream: torch.Tensor) -> torch.Tensor:
        if name in feed:
            stream = torch.from_numpy(feed[name]).to(dtype)
        taps[name] = stream
        return stream

    hidden = taps["embed"] = w["model.embed_tokens.weight"][torch.from_numpy(ids)]
    for index in range(c["layers"]):
        p, t = f"model.layers.{index}.", f"layers.{index}."
        hidden = fed(t + "attn.in", hidden)
        x = _rms_norm(hidden, w[p + "input_layernorm.weight"], eps)
        q = _matmul(x, w[p + "self_attn.q_proj.weight"], dtype).view(tokens, heads, head_dim)
        k = _matmul(x, w[p + "self_attn.k_proj.weight"], dtype).view(tokens, kv_heads, head_dim)
        v = _matmul(x, w[p + "self_attn.v_proj.weight"], dtype).view(tokens, kv_heads, head_dim)
        q = _rope(_rms_norm(q, w[p + "self_attn.q_norm.weight"], eps), head_dim, theta)
        k = _rope(_rms_norm(k, w[p + "self_attn.k_norm.weight"], eps), head_dim, theta)
        taps[t + "attn.k"], taps[t + "attn.v"] = k.reshape(tokens, -1), v.reshape(tokens, -1)
        attended = _attention(q, k, v)
        out = _reduced(partials, t + "attn.out", attended, w[p + "self_attn.o_proj.weight"], head_dim, tp, dtype)
        taps[t + "attn.out"] = out
        hidden = fed(t + "mlp.in", hidden + out)
        x = _rms_norm(hidden, w[p + "post_attention_layernorm.weight"], eps)
        gate, up = _matmul(x, w[p + "mlp.gate_proj.weight"], dtype), _matmul(x, w[p + "mlp.up_proj.weight"], dtype)
        out = _reduced(partials, t + "mlp.out", torch.nn.functional.silu(gate) * up, w[p + "mlp.down_proj.weight"], 1,
                       tp, dtype)
        taps[t + "mlp.out"] = out
        hidden = taps[t + "out"] = hidden + out
    hidden = fed("norm.in", hidden)
    taps["norm.out"] = normed = _rms_norm(hidden, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if c["tie_word_embeddings"] else w["lm_head.weight"]
    taps["logits"] = _matmul(normed, head, torch.float32)
    return taps


def decoder_taps_reordered(config: Any, weights: Any, ids: Any, tp: Any = 1, dtype: Any = "float32",
                           feed: Any = None, rank_partials: Any = False) -> dict[str, torch.Tensor]:
    """decoder-taps with blocked float32 matmuls, float64 attention and reverse-rank reduces, each rounded once to
    the compute dtype; the taps in forward order (MT-1.x), the ranks' partials with ``rank_partials`` (MT-1.6)."""
    c = _config(config)
    w = _weights(c, weights)
    tokens = _ids(c, ids)
    count = _tp(c, tp)
    compute = _dtype(dtype)
    fed = _feed(c, feed, tokens.shape[0])
    if not isinstance(rank_partials, bool):
        raise TypeError(f"rank_partials must be a bool, got {rank_partials!r} ({type(rank_partials).__name__})")
    cast = {name: torch.from_numpy(value).to(compute) for name, value in w.items()}
    return _forward(c, cast, tokens, fed, count, compute, rank_partials)
