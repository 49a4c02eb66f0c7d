"""Hypothesis strategies of LAYERS-NORM-ROPE case inputs: small plain mappings from which the builders draw the
tensors (shapes, dtypes, scales, seeds); spec/layers-norm-rope.md."""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

SEEDS = st.integers(0, 2**31 - 1)
HIDDEN = st.sampled_from([1, 2, 7, 64, 128, 1000, 4096]) | st.integers(1, 300)


def _rms(dtypes: list[str]) -> Any:
    return st.fixed_dictionaries(
        {"tokens": st.integers(1, 4), "hidden": HIDDEN, "dtype": st.sampled_from(dtypes), "seed": SEEDS,
         "scale": st.sampled_from([1e-3, 0.1, 1.0, 10.0, 100.0]), "eps": st.sampled_from([1e-6, 1e-5, 0.1]),
         "weight": st.booleans(), "residual": st.booleans()})


def rms_float32_bfloat16() -> Any:
    """RMSNorm inputs in float32 and bfloat16 (judged at their per-dtype defaults)."""
    return _rms(["float32", "bfloat16"])


def rms_float16() -> Any:
    """RMSNorm inputs in float16 (judged at rtol 2e-3: the two roundings after the float32 scale)."""
    return _rms(["float16"])


@st.composite
def rope_cases(draw: Any) -> dict[str, Any]:
    """RoPE inputs: dtype, style, head size and a rotary_dim up to it, a table length, positions drawn in it."""
    head_size = draw(st.sampled_from([2, 8, 64, 80, 128, 256]) | st.integers(1, 64).map(lambda k: 2 * k))
    rotary_dim = draw(st.sampled_from([head_size, head_size // 2 + head_size // 2 % 2, 2])
                      | st.integers(1, head_size // 2).map(lambda k: 2 * k))
    return {"tokens": draw(st.integers(1, 8)), "heads": draw(st.integers(1, 4)), "kv_heads": draw(st.integers(0, 2)),
            "head_size": head_size, "rotary_dim": max(2, rotary_dim),
            "max_position": draw(st.sampled_from([1, 64, 4096, 8192]) | st.integers(1, 8192)),
            "base": draw(st.sampled_from([100.0, 10000.0, 500000.0, 1000000.0])),
            "neox": draw(st.booleans()), "dtype": draw(st.sampled_from(["float32", "float16", "bfloat16"])),
            "seed": draw(SEEDS), "scale": draw(st.sampled_from([1.0, 3.0, 30.0]))}


def cache_cases() -> Any:
    """Table shapes: an even rotary_dim up to 256, up to 8192 positions (the cache gate's atol assumes at most 8192)."""
    return st.fixed_dictionaries(
        {"rotary_dim": st.integers(1, 128).map(lambda k: 2 * k),
         "max_position": st.sampled_from([1, 2, 8192]) | st.integers(1, 8192),
         "base": st.sampled_from([100.0, 10000.0, 500000.0, 1000000.0])})
