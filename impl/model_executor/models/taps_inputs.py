"""The inputs decoder-taps adds to tp-model-greedy's, checked before any rank starts (spec/model-taps.md MT-3.x):
the compute dtype and the feed (feed-point names and [T, hidden] float arrays)."""
from __future__ import annotations

import re
from typing import Any, Mapping

import torch

from impl.model_executor.models.qwen3_weights import ModelConfig, tensor_input

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
"""The compute dtypes decoder-taps accepts, by name (MT-3.2)."""

FEED_POINTS = ("layers.{i}.attn.in", "layers.{i}.mlp.in", "norm.in")
"""The feed points, {i} a layer index (MT-2.1)."""

_LAYER_FEED = re.compile(r"layers\.(0|[1-9][0-9]*)\.(attn|mlp)\.in")


def checked_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype named ``dtype``; a ValueError naming the value and the accepted names otherwise."""
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return DTYPES[dtype]


def checked_rank_partials(rank_partials: Any) -> bool:
    """Whether the ranks' partials are tapped (MT-1.6); a TypeError naming the value unless a bool."""
    if not isinstance(rank_partials, bool):
        raise TypeError(f"rank_partials must be a bool, got {rank_partials!r} ({type(rank_partials).__name__})")
    return rank_partials


def _feed_point(config: ModelConfig, name: Any) -> None:
    """Refuse a feed key that names no feed point of this model (MT-3.3)."""
    if name == "norm.in":
        return
    match = _LAYER_FEED.fullmatch(name) if isinstance(name, str) else None
    if match is None or int(match.group(1)) >= config.layers:
        raise ValueError(f"feed[{name!r}] is not a feed point of this {config.layers}-layer model; feed points: "
                         f"{', '.join(FEED_POINTS)} with i in [0, {config.layers})")


def checked_feed(config: ModelConfig, feed: Any, tokens: int) -> dict[str, torch.Tensor]:
    """The fed arrays by feed point, each a float tensor [tokens, hidden] (None or {}: nothing fed); an unknown feed
    point, a wrong shape (the key and both shapes) or a non-float array refused (MT-3.3)."""
    if feed is None:
        return {}
    if not isinstance(feed, Mapping):
        raise TypeError(f"feed must be a mapping of feed points to [T, hidden] tensors, got {type(feed).__name__}")
    checked = {}
    expected = [tokens, config.geometry.hidden]
    for name, value in feed.items():
        _feed_point(config, name)
        fed = tensor_input(f"feed[{name!r}]", value)
        if not fed.is_floating_point():
            dtype = str(fed.dtype).removeprefix("torch.")
            raise TypeError(f"feed[{name!r}] has dtype {dtype}; a float dtype is needed")
        if list(fed.shape) != expected:
            raise ValueError(f"feed[{name!r}] has shape {list(fed.shape)}, expected {expected} ([T, hidden])")
        checked[name] = fed
    return checked
