"""The inputs of tp-model-greedy checked before any rank starts (spec/tensor-parallel.md TP-5.5, TP-4.8): the
config's fields, the HF-named weights (every name known and present, every shape the config's, one float dtype; the
attention biases only with their config flags), the prompt's ids, the step count and tp, with a geometry the shard
plan refuses refused here, by the plan's message. Each refusal is a ValueError or TypeError naming the field or
tensor and the numbers."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import torch

from impl.distributed.gloo_world import MAX_TP
from impl.distributed.shard_plan import GEOMETRY_FIELDS, ModelGeometry, shard_plan
from impl.v1.field_checks import check_fields, check_int

INT_FIELDS = ("layers", "hidden", "num_heads", "num_kv_heads", "head_dim", "ffn", "vocab", "max_position")
FIELDS = (*INT_FIELDS, "tie_word_embeddings", "rms_norm_eps", "rope_theta")
"""The config's required fields."""
BIAS_FIELDS = ("qkv_bias", "o_proj_bias")
"""The config's optional bool fields, false when absent: q/k/v_proj biases (Qwen2's; Llama's attention_bias) and
o_proj's (Llama's attention_bias)."""


def _flag(config: Mapping[str, Any], name: str) -> bool:
    """The bool field ``name`` of the config (an absent optional one false); TypeError naming it otherwise."""
    value = config.get(name, False)
    if not isinstance(value, bool):
        raise TypeError(f"config.{name} must be a bool, got {value!r} ({type(value).__name__})")
    return value


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class ModelConfig:
    """The decoder's sizes and constants (the operation's `config`): the geometry the shard plan cuts by (TP-4.7),
    the layer count, the RoPE table's length and base, RMSNorm's eps, which attention projections carry a bias."""

    geometry: ModelGeometry
    layers: int
    max_position: int
    rms_norm_eps: float
    rope_theta: float
    qkv_bias: bool = False
    o_proj_bias: bool = False

    @classmethod
    def from_mapping(cls, config: Any) -> "ModelConfig":
        """The config of a mapping; an unknown or missing field, or a value of the wrong kind, named."""
        if not isinstance(config, Mapping):
            raise TypeError(f"config must be a mapping of {', '.join(FIELDS)}; got {type(config).__name__}")
        check_fields("config", config, (*FIELDS, *BIAS_FIELDS), FIELDS)
        for name in INT_FIELDS:
            check_int("config", name, config[name], minimum=1)
        if config["head_dim"] % 2:
            raise ValueError(f"config.head_dim={config['head_dim']} must be even (neox RoPE rotates pairs)")
        tied, qkv_bias, o_proj_bias = (_flag(config, name) for name in ("tie_word_embeddings", *BIAS_FIELDS))
        eps = _number("config.rms_norm_eps", config["rms_norm_eps"])
        if eps < 0:
            raise ValueError(f"config.rms_norm_eps must be >= 0, got {eps!r}")
        theta = _number("config.rope_theta", config["rope_theta"])
        if theta <= 1:
            raise ValueError(f"config.rope_theta must be > 1, got {theta!r}")
        geometry = ModelGeometry(**{name: config[name] for name in GEOMETRY_FIELDS}, tie_word_embeddings=tied)
        return cls(geometry, config["layers"], config["max_position"], eps, theta, qkv_bias, o_proj_bias)

    def weight_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every HF tensor of the checkpoint and its shape [out, in] (a bias [out], each after its weight, only with
        its flag); lm_head.weight only when untied."""
        g = self.geometry
        q, kv = g.num_heads * g.head_dim, g.num_kv_heads * g.head_dim
        layer: dict[str, tuple[int, ...]] = {"input_layernorm.weight": (g.hidden,)}
        for projection, out in (("q", q), ("k", kv), ("v", kv)):
            layer[f"self_attn.{projection}_proj.weight"] = (out, g.hidden)
            if self.qkv_bias:
                layer[f"self_attn.{projection}_proj.bias"] = (out,)
        layer["self_attn.o_proj.weight"] = (g.hidden, q)
        if self.o_proj_bias:
            layer["self_attn.o_proj.bias"] = (g.hidden,)
        layer.update({"self_attn.q_norm.weight": (g.head_dim,), "self_attn.k_norm.weight": (g.head_dim,),
                      "post_attention_layernorm.weight": (g.hidden,), "mlp.gate_proj.weight": (g.ffn, g.hidden),
                      "mlp.up_proj.weight": (g.ffn, g.hidden), "mlp.down_proj.weight": (g.hidden, g.ffn)})
        shapes = {"model.embed_tokens.weight": (g.vocab, g.hidden)}
        for index in range(self.layers):
            shapes.update({f"model.layers.{index}.{name}": shape for name, shape in layer.items()})
        shapes["model.norm.weight"] = (g.hidden,)
        if not g.tie_word_embeddings:
            shapes["lm_head.weight"] = (g.vocab, g.hidden)
        return shapes


def tensor_input(where: str, value: Any) -> torch.Tensor:
    """A torch tensor of a tensor input (a numpy array is copied, an ml_dtypes bfloat16 one bit for bit); TypeError
    naming ``where`` otherwise."""
    if isinstance(value, torch.Tensor):
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ == "ndarray":
        if value.dtype.name == "bfloat16" and value.dtype.itemsize == 2:
            import numpy

            return torch.from_numpy(numpy.array(value).view(numpy.int16)).view(torch.bfloat16)
        return torch.tensor(value)
    raise TypeError(f"{where} must be a tensor, got {type(value).__name__}")


def checked_weights(config: ModelConfig, weights: Any) -> dict[str, torch.Tensor]:
    """The weights as float32 torch tensors once every expected name is there with its shape and dtype (TP-5.5:
    float32 only); an unknown or missing name, a wrong shape (both shapes) or dtype is refused, named."""
    if not isinstance(weights, Mapping):
        raise TypeError(f"weights must be a mapping of HF tensor names to tensors, got {type(weights).__name__}")
    shapes = config.weight_shapes()
    unknown = [name for name in weights if name not in shapes]
    if unknown:
        why = " (tie_word_embeddings is true: lm_head shares embed_tokens)" if unknown[0] == "lm_head.weight" else ""
        raise ValueError(f"weights has an unknown tensor {unknown[0]!r}{why}")
    missing = [name for name in shapes if name not in weights]
    if missing:
        raise ValueError(f"weights is missing {missing[0]!r} (shape {list(shapes[missing[0]])})")
    checked = {name: tensor_input(f"weights[{name!r}]", weights[name]) for name in shapes}
    for name, tensor in checked.items():
        if tuple(tensor.shape) != shapes[name]:
            raise ValueError(f"weights[{name!r}] has shape {list(tensor.shape)}, expected {list(shapes[name])}")
        if tensor.dtype != torch.float32:
            raise ValueError(f"weights[{name!r}] has dtype {str(tensor.dtype).removeprefix('torch.')}; accepted: "
                             f"float32")
    return checked


def _checked_ids(config: ModelConfig, name: str, value: Any) -> torch.Tensor:
    """A non-empty int64 tensor [n] of ids in [0, vocab); ``name`` is the field refused."""
    ids = tensor_input(name, value)
    if ids.dtype != torch.int64 or ids.dim() != 1 or ids.shape[0] < 1:
        raise ValueError(f"{name} must be a non-empty int64 tensor [n], got {str(ids.dtype).removeprefix('torch.')} "
                         f"of shape {list(ids.shape)}")
    outside = ((ids < 0) | (ids >= config.geometry.vocab)).nonzero()
    if outside.numel():
        at = int(outside[0, 0])
        raise ValueError(f"{name}[{at}] = {int(ids[at])} is outside [0, vocab={config.geometry.vocab})")
    return ids


def checked_prompt(config: ModelConfig, prompt: Any, steps: Any) -> tuple[torch.Tensor, int]:
    """The prompt (int64 [n], n >= 1, ids in [0, vocab)) and the step count (an int >= 1), with every position the
    decode feeds (up to n + steps - 2) inside the RoPE table of config.max_position rows."""
    ids = _checked_ids(config, "prompt", prompt)
    check_int("", "steps", steps, minimum=1)
    count = int(steps)
    last = ids.shape[0] + count - 2
    if last >= config.max_position:
        raise ValueError(f"a prompt of {ids.shape[0]} tokens and steps={count} feed positions up to {last}, beyond "
                         f"config.max_position={config.max_position}")
    return ids, count


def checked_ids(config: ModelConfig, ids: Any) -> torch.Tensor:
    """The ids of one forward (int64 [T], T >= 1, in [0, vocab)), every position inside the RoPE table
    (spec/model-taps.md MT-3.1)."""
    checked = _checked_ids(config, "ids", ids)
    if checked.shape[0] > config.max_position:
        raise ValueError(f"ids holds {checked.shape[0]} tokens, beyond config.max_position={config.max_position}")
    return checked


def checked_inputs(config: Any, weights: Any, prompt: Any, steps: Any,
                   tp: Any) -> tuple[ModelConfig, dict[str, torch.Tensor], torch.Tensor, int, int]:
    """(config, weights, prompt, steps, tp) of one call, checked in that order, tp last: in [1, MAX_TP] and a
    geometry the shard plan cuts (TP-4.8)."""
    checked = ModelConfig.from_mapping(config)
    full = checked_weights(checked, weights)
    ids, count = checked_prompt(checked, prompt, steps)
    return checked, full, ids, count, checked_tp(checked, tp)


def checked_tp(config: ModelConfig, tp: Any) -> int:
    """tp in [1, MAX_TP], and a geometry the shard plan cuts at tp (TP-4.8)."""
    check_int("", "tp", tp, minimum=1)
    if tp > MAX_TP:
        raise ValueError(f"tp={tp} is more than the {MAX_TP} ranks a gloo world here may have")
    shard_plan(config.geometry, tp)
    return tp
