"""Builders of the LAYERS-NORM-ROPE gates: a case's plain input -> the tensors of one call (spec/layers-norm-rope.md).

RMSNorm input: {tokens, hidden, dtype, seed, scale (default 1), weight: true|false (default true), weight_spread
(default 0.1: weight = 1 + spread·N(0,1)), residual: bool, eps (default 1e-6); weight_hidden and
residual_tokens give those tensors another shape, for the refusals}. RoPE input: {tokens, heads,
kv_heads (0: no key), head_size, rotary_dim, max_position, base, neox, dtype, seed, scale, positions (a list, or
absent: drawn in [0, max_position)), query_width (default heads·head_size)}. The impl gets torch tensors, the oracle numpy arrays of the same bits.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from vllm_gates import Call, as_torch

from .tensors import generator, normal


def _torch(value: Any) -> Any:
    return None if value is None else as_torch(value)


def rms_arrays(case: Mapping[str, Any]) -> dict[str, Any]:
    """x, weight (or None), residual (or None) and eps of an RMSNorm case."""
    shape = tuple(int(case[axis]) for axis in ("tokens", "hidden") if axis in case)  # no tokens: one 1-d row
    scale = float(case.get("scale", 1.0))
    weight = None
    if case.get("weight", True):
        weight_shape = (int(case.get("weight_hidden", shape[-1])),)
        weight = normal(case, 1, weight_shape, float(case.get("weight_spread", 0.1)), mean=1.0)
    residual = None
    if case.get("residual", False):
        residual = normal(case, 2, (int(case.get("residual_tokens", shape[0])), *shape[1:]), scale)
    return {"x": normal(case, 0, shape, scale), "weight": weight, "residual": residual,
            "eps": float(case.get("eps", 1e-6))}


def rms_impl(case: Mapping[str, Any]) -> Call:
    """The rms-norm operation's torch call: rms_norm(x, weight, eps, residual=...)."""
    arrays = rms_arrays(case)
    return Call(args=(as_torch(arrays["x"]), _torch(arrays["weight"]), arrays["eps"]),
                kwargs={"residual": _torch(arrays["residual"])})


def rms_oracle(case: Mapping[str, Any]) -> Call:
    """The same call with numpy arrays, for the float64 oracle."""
    arrays = rms_arrays(case)
    return Call(args=(arrays["x"], arrays["weight"], arrays["eps"]), kwargs={"residual": arrays["residual"]})


def rope_arrays(case: Mapping[str, Any]) -> dict[str, Any]:
    """positions, query, key (or None) and the configuration of a RoPE case."""
    tokens, head_size = int(case["tokens"]), int(case["head_size"])
    max_position = int(case["max_position"])
    scale = float(case.get("scale", 1.0))
    if "positions" in case:
        positions = np.asarray(case["positions"], dtype=np.int64)
    else:
        positions = generator(case, 3).integers(0, max_position, size=tokens, dtype=np.int64)
    kv_heads = int(case.get("kv_heads", 1))
    key = normal(case, 5, (tokens, kv_heads * head_size), scale) if kv_heads else None
    query_width = int(case.get("query_width", int(case["heads"]) * head_size))
    return {"positions": positions, "query": normal(case, 4, (tokens, query_width), scale),
            "key": key, "config": {"head_size": head_size, "rotary_dim": int(case.get("rotary_dim", head_size)),
                                   "max_position": max_position, "base": float(case.get("base", 10000.0)),
                                   "neox": bool(case.get("neox", True))}}


def rope_impl(case: Mapping[str, Any]) -> Call:
    """The rotary-embedding operation's torch call: rope_forward(positions, query, key, **config)."""
    arrays = rope_arrays(case)
    return Call(args=(as_torch(arrays["positions"]), as_torch(arrays["query"]), _torch(arrays["key"])),
                kwargs=arrays["config"])


def rope_oracle(case: Mapping[str, Any]) -> Call:
    """The same call with numpy arrays, for the complex-multiplication oracle."""
    arrays = rope_arrays(case)
    return Call(args=(arrays["positions"], arrays["query"], arrays["key"]), kwargs=arrays["config"])


def cache_call(case: Mapping[str, Any]) -> Call:
    """cos_sin_cache(rotary_dim, max_position, base) of a case."""
    return Call(args=(int(case["rotary_dim"]), int(case["max_position"]), float(case.get("base", 10000.0))))


FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _fixture(case: Mapping[str, Any]) -> dict[str, Any]:
    """The tensors of ``fixtures/<input.fixture>.safetensors`` (torch); a ValueError naming the file or tensor missing."""
    from safetensors import safe_open

    path = FIXTURES / f"{case['fixture']}.safetensors"
    if not path.is_file():
        raise ValueError(f"input.fixture={case['fixture']!r}: no file {path} (upstream/dump_numeric_fixture.py writes it)")
    with safe_open(str(path), framework="pt") as handle:
        names, metadata = set(handle.keys()), handle.metadata() or {}
        missing = sorted({"x", "weight", "output"} - names)
        if missing:
            raise ValueError(f"{path}: no tensor named {', '.join(missing)} (it holds {', '.join(sorted(names))})")
        return {name: handle.get_tensor(name) for name in ("x", "weight", "output")} | {"eps": float(metadata["eps"])}


def recorded_impl(case: Mapping[str, Any]) -> Call:
    """rms_norm on the fixture's x and weight, at the eps its metadata records."""
    tensors = _fixture(case)
    return Call(args=(tensors["x"], tensors["weight"], tensors["eps"]))


def recorded_oracle(case: Mapping[str, Any]) -> Call:
    """vLLM's output as the fixture recorded it."""
    return Call(args=(_fixture(case)["output"].numpy(),))
