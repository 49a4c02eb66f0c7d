"""Builders of the LAYERS-NORM-ROPE gates (spec/layers-norm-rope.md): a case's input, whose tensors arrive as numpy
arrays (the cases' tensor spellings, the strategies' draws), -> the call of one target. The impl and upstream get
torch tensors of the same bits (vllm_gates.as_torch), the float64 oracle the numpy arrays.

rms-norm input: {x, weight (or None), eps, residual (or None)}. rotary-embedding input: {positions, query, key (or
None), head_size, rotary_dim, max_position, base, neox}. rope-cos-sin-cache input: {rotary_dim, max_position, base}.
"""
from __future__ import annotations

from typing import Any, Mapping

from vllm_gates import Call, as_torch

ROPE_CONFIG = ("head_size", "rotary_dim", "max_position", "base", "neox")


def _torch(value: Any) -> Any:
    return None if value is None else as_torch(value)


def rms_impl(case: Mapping[str, Any]) -> Call:
    """The rms-norm operation's torch call: rms_norm(x, weight, eps, residual=...)."""
    return Call(args=(as_torch(case["x"]), _torch(case["weight"]), float(case["eps"])),
                kwargs={"residual": _torch(case["residual"])})


def rms_oracle(case: Mapping[str, Any]) -> Call:
    """The same call with the numpy arrays, for the float64 oracle."""
    return Call(args=(case["x"], case["weight"], float(case["eps"])), kwargs={"residual": case["residual"]})


def _rope_config(case: Mapping[str, Any]) -> dict[str, Any]:
    return {name: case[name] for name in ROPE_CONFIG}


def rope_impl(case: Mapping[str, Any]) -> Call:
    """The rotary-embedding operation's torch call: rope_forward(positions, query, key, **config)."""
    return Call(args=(as_torch(case["positions"]), as_torch(case["query"]), _torch(case["key"])),
                kwargs=_rope_config(case))


def rope_oracle(case: Mapping[str, Any]) -> Call:
    """The same call with the numpy arrays, for the complex-multiplication oracle."""
    return Call(args=(case["positions"], case["query"], case["key"]), kwargs=_rope_config(case))


def cache_call(case: Mapping[str, Any]) -> Call:
    """cos_sin_cache(rotary_dim, max_position, base) of a case."""
    return Call(args=(int(case["rotary_dim"]), int(case["max_position"]), float(case["base"])))
