"""HF transformers' own Qwen3ForCausalLM as a reference of the decoder-taps operation (spec/model-taps.md): the
model built from a Qwen3Config of the operation's `config`, the HF-named weights loaded by name, eval mode, eager
attention, every weight in the compute dtype; one forward over the ids at positions 0..T-1, read at the named taps.

transformers is optional (the `hf` extra pins 5.25.x) and imported only inside `decoder_taps`; `unavailable_reason()`
says why the reference cannot run here (a skip reason), and `decoder_taps` raises ImportError with that reason.

How each tap is read, every one a tensor transformers itself computed:
- `embed`, `layers.{i}.attn.out`, `layers.{i}.mlp.out`, `layers.{i}.out`, `norm.out`: forward hooks on embed_tokens,
  self_attn (its first output: o_proj's), mlp, the decoder layer, the final norm;
- `layers.{i}.attn.in`, `layers.{i}.mlp.in`, `norm.in`: forward pre-hooks on the decoder layer, its
  post_attention_layernorm (whose input is the residual after the attention add) and the final norm;
- `layers.{i}.attn.k`, `layers.{i}.attn.v`: what layer i writes to its KV cache: the forward is given an empty
  DynamicCache, whose layer i holds, after it, the key states after k_norm and apply_rotary_pos_emb and the value
  states Qwen3Attention.forward handed to `cache.update`;
- `logits`: the forward's logits, as float32.
Feed: `layers.{i}.attn.in` and `norm.in` are the first argument of the decoder layer and of the final norm, replaced
by a pre-hook. `layers.{i}.mlp.in` is a local of Qwen3DecoderLayer.forward (`residual + attention output`), which the
MLP's residual add reads too, so a layer fed there runs `_fed_mlp_forward`: the steps of Qwen3DecoderLayer.forward
(transformers 5.25) with the layer's own submodules, the residual replaced after the attention add.
"""
from __future__ import annotations

import re
from importlib import metadata
from typing import Any, Callable, Mapping

import numpy as np

import upstream  # noqa: F401  (offline Hugging Face environment before transformers' import)

PINNED = "5.25"
"""The transformers release series this reference is written against (pyproject.toml's `hf` extra)."""

DTYPES = ("float32", "bfloat16", "float16")
INT_FIELDS = ("layers", "hidden", "num_heads", "num_kv_heads", "head_dim", "ffn", "vocab", "max_position")
FIELDS = (*INT_FIELDS, "tie_word_embeddings", "rms_norm_eps", "rope_theta")
FEED_POINTS = re.compile(r"layers\.(\d+)\.(attn|mlp)\.in|norm\.in")


def installed_version() -> str | None:
    """The installed transformers' version (from its distribution metadata, without importing it), or None."""
    try:
        return metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return None


def unavailable_reason() -> str | None:
    """None when transformers of the pinned series is installed; else why not (a skip reason)."""
    version = installed_version()
    if version is None:
        return f"transformers is not installed (the HF reference pins {PINNED}.x: pip install -e '.[hf]')"
    if version.split(".")[:2] != PINNED.split("."):
        return f"transformers {version} is installed, the HF reference pins {PINNED}.x (pip install -e '.[hf]')"
    return None


def _checked_config(config: Any) -> dict[str, Any]:
    """The operation's config mapping, every field present and known, the sizes whole numbers >= 1."""
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping of {', '.join(FIELDS)}; got {type(config).__name__}")
    unknown = sorted(set(config) - set(FIELDS))
    missing = [name for name in FIELDS if name not in config]
    if unknown or missing:
        raise ValueError(f"config has unknown fields {unknown} and lacks {missing}; it takes {', '.join(FIELDS)}")
    for name in INT_FIELDS:
        value = config[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"config.{name} must be a whole number >= 1, got {value!r}")
    if config["num_heads"] % config["num_kv_heads"] or config["head_dim"] % 2:
        raise ValueError(f"config.num_heads={config['num_heads']} must be a multiple of config.num_kv_heads="
                         f"{config['num_kv_heads']} and config.head_dim={config['head_dim']} even")
    if not isinstance(config["tie_word_embeddings"], bool):
        raise TypeError(f"config.tie_word_embeddings must be a bool, got {config['tie_word_embeddings']!r}")
    for name, low in (("rms_norm_eps", 0.0), ("rope_theta", 1.0)):
        value = config[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value < float("inf"):
            raise ValueError(f"config.{name} must be a finite number >= {low}, got {value!r}")
    return dict(config)


def _hf_config(config: Mapping[str, Any]) -> Any:
    """transformers' Qwen3Config of the operation's config (no sliding window, no attention bias, SiLU)."""
    from transformers import Qwen3Config

    return Qwen3Config(num_hidden_layers=config["layers"], hidden_size=config["hidden"],
                       num_attention_heads=config["num_heads"], num_key_value_heads=config["num_kv_heads"],
                       head_dim=config["head_dim"], intermediate_size=config["ffn"], vocab_size=config["vocab"],
                       tie_word_embeddings=config["tie_word_embeddings"], rms_norm_eps=float(config["rms_norm_eps"]),
                       rope_parameters={"rope_type": "default", "rope_theta": float(config["rope_theta"])},
                       max_position_embeddings=config["max_position"], hidden_act="silu", attention_bias=False,
                       use_sliding_window=False)


def _torch(where: str, value: Any) -> Any:
    """A torch tensor of a tensor input (numpy copied, an ml_dtypes bfloat16 array bit for bit); TypeError naming
    ``where`` otherwise."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, np.ndarray):
        if value.dtype.name == "bfloat16" and value.dtype.itemsize == 2:
            return torch.from_numpy(np.ascontiguousarray(value).view(np.int16).copy()).view(torch.bfloat16)
        return torch.from_numpy(np.array(value))
    raise TypeError(f"{where} must be a tensor (numpy array or torch tensor), got {type(value).__name__}")


def _numpy(tensor: Any) -> np.ndarray:
    """A CPU torch tensor as a numpy array of its dtype (bfloat16 as ml_dtypes.bfloat16, bit for bit)."""
    import torch

    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.contiguous().numpy()


def _load_weights(model: Any, weights: Any, compute: Any) -> None:
    """Copy every HF-named weight into the model's parameter of that name, cast to ``compute``: every parameter
    given, no other name (lm_head.weight is embed_tokens.weight's when tied), each of its parameter's shape."""
    import torch

    if not isinstance(weights, Mapping):
        raise TypeError(f"weights must be a mapping of HF tensor names to tensors, got {type(weights).__name__}")
    parameters = dict(model.named_parameters())  # a tied lm_head is listed once, as model.embed_tokens.weight
    unknown = [name for name in weights if name not in parameters]
    if unknown:
        why = " (tie_word_embeddings is true: lm_head shares embed_tokens)" if unknown[0] == "lm_head.weight" else ""
        raise ValueError(f"weights has an unknown tensor {unknown[0]!r}{why}")
    missing = [name for name in parameters if name not in weights]
    if missing:
        raise ValueError(f"weights is missing {missing[0]!r} (shape {list(parameters[missing[0]].shape)})")
    with torch.no_grad():
        for name, parameter in parameters.items():
            tensor = _torch(f"weights[{name!r}]", weights[name])
            if tuple(tensor.shape) != tuple(parameter.shape):
                raise ValueError(f"weights[{name!r}] has shape {list(tensor.shape)}, expected "
                                 f"{list(parameter.shape)}")
            if not tensor.is_floating_point():
                raise ValueError(f"weights[{name!r}] has dtype {str(tensor.dtype).removeprefix('torch.')}; a float "
                                 f"dtype is cast to the compute dtype")
            parameter.copy_(tensor.to(compute))


def _checked_ids(ids: Any, config: Mapping[str, Any]) -> Any:
    """int64 [T], 1 <= T <= max_position, every id in [0, vocab)."""
    import torch

    tokens = _torch("ids", ids)
    if tokens.dtype != torch.int64 or tokens.dim() != 1 or tokens.shape[0] < 1:
        raise ValueError(f"ids must be a non-empty int64 tensor [T], got {str(tokens.dtype).removeprefix('torch.')} "
                         f"of shape {list(tokens.shape)}")
    outside = ((tokens < 0) | (tokens >= config["vocab"])).nonzero()
    if outside.numel():
        at = int(outside[0, 0])
        raise ValueError(f"ids[{at}] = {int(tokens[at])} is outside [0, vocab={config['vocab']})")
    if tokens.shape[0] > config["max_position"]:
        raise ValueError(f"ids has {tokens.shape[0]} tokens, beyond config.max_position={config['max_position']}")
    return tokens


def _checked_feed(feed: Any, config: Mapping[str, Any], tokens: int, compute: Any) -> dict[str, Any]:
    """Each fed array as a [T, hidden] tensor in the compute dtype, keyed by its feed point."""
    if feed is None:
        return {}
    if not isinstance(feed, Mapping):
        raise TypeError(f"feed must be a mapping of feed points to [T, hidden] arrays, got {type(feed).__name__}")
    fed = {}
    for name, value in feed.items():
        match = FEED_POINTS.fullmatch(str(name))
        if match is None or (match.group(1) is not None and int(match.group(1)) >= config["layers"]):
            raise ValueError(f"feed has an unknown feed point {name!r}; the feed points are layers.{{i}}.attn.in and "
                             f"layers.{{i}}.mlp.in for i in [0, {config['layers']}), and norm.in")
        tensor = _torch(f"feed[{name!r}]", value)
        expected = [tokens, config["hidden"]]
        if list(tensor.shape) != expected:
            raise ValueError(f"feed[{name!r}] has shape {list(tensor.shape)}, expected {expected} (ids x hidden)")
        fed[name] = tensor.to(compute).reshape(1, tokens, config["hidden"])
    return fed


def _fed_mlp_forward(layer: Any, fed: Any) -> Callable[..., Any]:
    """Qwen3DecoderLayer.forward's steps with the residual after the attention add replaced by ``fed``: the
    attention still runs (its K, V and output are taps), the MLP sub-block starts from ``fed``."""

    def forward(hidden_states: Any, attention_mask: Any = None, position_ids: Any = None, cache: Any = None,
                use_cache: Any = False, position_embeddings: Any = None, **kwargs: Any) -> Any:
        attended, _ = layer.self_attn(hidden_states=layer.input_layernorm(hidden_states),
                                      attention_mask=attention_mask, position_ids=position_ids, cache=cache,
                                      use_cache=use_cache, position_embeddings=position_embeddings, **kwargs)
        del attended  # the free-running residual (hidden_states + attended) is what the feed replaces
        residual = fed
        return residual + layer.mlp(layer.post_attention_layernorm(residual))

    return forward


class _Taps:
    """The hooks of one forward: the taps recorded in forward order, the feed applied at its points."""

    def __init__(self, fed: Mapping[str, Any]):
        self.fed = fed
        self.taps: dict[str, Any] = {}

    def record(self, name: str, tensor: Any) -> None:
        self.taps[name] = tensor.detach()[0].clone()

    def output(self, name: str) -> Callable[..., None]:
        def hook(module: Any, args: Any, output: Any) -> None:
            self.record(name, output[0] if isinstance(output, tuple) else output)
        return hook

    def input(self, name: str, feeds: bool = True) -> Callable[..., Any]:
        """A pre-hook recording the module's first argument (``hidden_states``), replaced first where ``feeds`` and
        fed."""
        def hook(module: Any, args: Any, kwargs: Any) -> Any:
            if feeds and name in self.fed and "hidden_states" in kwargs:
                kwargs = {**kwargs, "hidden_states": self.fed[name]}
            elif feeds and name in self.fed:
                args = (self.fed[name], *args[1:])
            self.record(name, kwargs["hidden_states"] if "hidden_states" in kwargs else args[0])
            return args, kwargs
        return hook


def decoder_taps(config: Any, weights: Any, ids: Any, feed: Any = None, dtype: str = "float32",
                 tp: int = 1, rank_partials: bool = False) -> dict[str, np.ndarray]:
    """The decoder-taps operation answered by transformers' Qwen3ForCausalLM: tap name -> [T, width] numpy array
    in forward order, in the compute dtype (bfloat16 as ml_dtypes.bfloat16), the logits float32. ``tp`` is checked
    and otherwise unused: the reference runs unsharded, so it has no ranks' partials to give (``rank_partials``
    true is refused, never answered without them)."""
    if rank_partials is not False:
        raise ValueError(f"rank_partials={rank_partials!r}: transformers' Qwen3 runs unsharded and has no ranks' "
                         f"partials (spec/model-taps.md MT-1.6); compare them against the oracle")
    reason = unavailable_reason()
    if reason is not None:
        raise ImportError(reason)
    import torch
    from transformers import AutoModelForCausalLM, DynamicCache

    checked = _checked_config(config)
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ValueError(f"tp must be a whole number >= 1, got {tp!r}")
    compute = getattr(torch, dtype)
    tokens = _checked_ids(ids, checked)
    count = tokens.shape[0]
    fed = _checked_feed(feed, checked, count, compute)
    hf_config = _hf_config(checked)
    model = AutoModelForCausalLM.from_config(hf_config, dtype=compute, attn_implementation="eager").eval()
    _load_weights(model, weights, compute)

    recorder = _Taps(fed)
    decoder = model.model
    handles = [decoder.embed_tokens.register_forward_hook(recorder.output("embed"))]
    for index, layer in enumerate(decoder.layers):
        at = f"layers.{index}."
        handles += [layer.register_forward_pre_hook(recorder.input(at + "attn.in"), with_kwargs=True),
                    layer.self_attn.register_forward_hook(recorder.output(at + "attn.out")),
                    layer.post_attention_layernorm.register_forward_pre_hook(
                        recorder.input(at + "mlp.in", feeds=False), with_kwargs=True),
                    layer.mlp.register_forward_hook(recorder.output(at + "mlp.out")),
                    layer.register_forward_hook(recorder.output(at + "out"))]
        if at + "mlp.in" in fed:  # the pre-hook above records the fed value the forward below passes the norm
            layer.forward = _fed_mlp_forward(layer, fed[at + "mlp.in"])
    handles += [decoder.norm.register_forward_pre_hook(recorder.input("norm.in"), with_kwargs=True),
                decoder.norm.register_forward_hook(recorder.output("norm.out"))]
    cache = DynamicCache(config=hf_config)
    with torch.no_grad():
        logits = model(input_ids=tokens.reshape(1, count), position_ids=torch.arange(count).reshape(1, count),
                       cache=cache, use_cache=True).logits
    for handle in handles:
        handle.remove()
    return _in_forward_order(recorder.taps, cache, checked, logits[0].float())


def _in_forward_order(taps: Mapping[str, Any], cache: Any, config: Mapping[str, Any],
                      logits: Any) -> dict[str, np.ndarray]:
    """The contract's tap order, layer i's K and V read from the cache ([1, Hkv, T, D] -> [T, Hkv*D])."""
    width = config["num_kv_heads"] * config["head_dim"]
    ordered = {"embed": taps["embed"]}
    for index in range(config["layers"]):
        at = f"layers.{index}."
        stored = cache.layers[index]
        ordered[at + "attn.in"] = taps[at + "attn.in"]
        ordered[at + "attn.k"] = stored.keys[0].transpose(0, 1).reshape(-1, width)
        ordered[at + "attn.v"] = stored.values[0].transpose(0, 1).reshape(-1, width)
        for name in ("attn.out", "mlp.in", "mlp.out", "out"):
            ordered[at + name] = taps[at + name]
    ordered.update({"norm.in": taps["norm.in"], "norm.out": taps["norm.out"], "logits": logits})
    return {name: _numpy(tensor) for name, tensor in ordered.items()}
