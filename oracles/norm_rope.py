"""Oracle for RMSNorm and rotary embedding (spec/layers-norm-rope.md), derived in float64 with numpy.

Each value is computed exactly in float64 and rounded to the precision the spec names at that step (NR-1.2, NR-3.3):
RMSNorm's variance and scale in float32, the weight multiply in the weight's dtype; a rotation's products and sums in
the input's dtype. A value is rounded to float16 or bfloat16 through float32, as torch's CPU arithmetic in those
dtypes rounds a float32 result. RoPE is written as complex multiplication: the pair (a, b) of a head is z = a + ib,
rotated to z·e^{iθ} = z·cos θ + z·(i sin θ); the pairs are gathered by an index map, never by rotate_half or chunk.
The cos/sin table is the exact float64 one (cos_sin_table) rounded to float32 once, not vLLM's float32 arithmetic,
whose pow is the platform's; the rotary-embedding gate's NMSE bound covers the difference, and the
rope-cos-sin-cache gate checks vLLM's float32 table against the exact angles.
"""
from __future__ import annotations

from typing import Any

import numpy as np

Array = np.ndarray


def _rounded(values: Array, dtype: Any) -> Array:
    """``values`` (float64) rounded to ``dtype`` as a float32 result is rounded to it."""
    return values.astype(np.float32).astype(dtype)


def _wide(values: Array) -> Array:
    return np.asarray(values).astype(np.float64)


def rms_norm(x: Array, weight: Array | None, eps: float, residual: Array | None = None) -> Any:
    """RMSNorm over the last axis with float32 statistics; with ``residual``, (normed, rounded sum) (NR-1.1..NR-1.4)."""
    in_dtype = x.dtype
    total = _wide(x) if residual is None else _wide(_rounded(_wide(x) + _wide(residual), np.float32))
    mean_square = _wide(_rounded(np.mean(total * total, axis=-1, keepdims=True), np.float32))
    shifted = _wide(_rounded(mean_square + _wide(np.float32(eps)), np.float32))
    scale = _wide(_rounded(1.0 / np.sqrt(shifted), np.float32))
    normed = _rounded(total * scale, np.float32)
    if weight is not None:
        normed = _rounded(_wide(normed.astype(weight.dtype)) * _wide(weight), weight.dtype)
    out = _rounded(_wide(normed), in_dtype)
    if residual is None:
        return out
    return out, _rounded(total, in_dtype)


def cos_sin_table(rotary_dim: int, max_position: int, base: float) -> Array:
    """The exact table, float64 [max_position, rotary_dim]: cos(p·θ_j) then sin(p·θ_j), θ_j = base^(-2j/rotary_dim)."""
    theta = np.power(float(base), -np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)
    angles = np.arange(max_position, dtype=np.float64)[:, None] * theta[None, :]
    return np.concatenate((np.cos(angles), np.sin(angles)), axis=-1)


def cos_sin_cache(rotary_dim: int, max_position: int, base: float) -> Array:
    """The exact table rounded to float32 once: what the rope-cos-sin-cache gate compares vLLM's float32 table with."""
    return cos_sin_table(rotary_dim, max_position, base).astype(np.float32)


def _pair_indices(rotary_dim: int, neox: bool) -> tuple[Array, Array]:
    """Where each pair's real and imaginary parts sit in a head: (j, j + d/2) neox, (2j, 2j + 1) GPT-J (NR-3.2)."""
    half = rotary_dim // 2
    if neox:
        return np.arange(half), np.arange(half) + half
    return np.arange(half) * 2, np.arange(half) * 2 + 1


def _rotated(x: Array, cos: Array, sin: Array, head_size: int, rotary_dim: int, neox: bool) -> Array:
    """x [tokens, heads·head_size] with each head's pairs multiplied by e^{iθ} of its token, in x's dtype."""
    tokens = x.shape[0]
    heads = x.reshape(tokens, -1, head_size)
    real_at, imag_at = _pair_indices(rotary_dim, neox)
    z = _wide(heads[..., real_at]) + 1j * _wide(heads[..., imag_at])
    c, s = _wide(cos)[:, None, :], _wide(sin)[:, None, :]
    along_cos, along_sin = z * c, z * (1j * s)
    real = _rounded(_wide(_rounded(along_cos.real, x.dtype)) + _wide(_rounded(along_sin.real, x.dtype)), x.dtype)
    imag = _rounded(_wide(_rounded(along_cos.imag, x.dtype)) + _wide(_rounded(along_sin.imag, x.dtype)), x.dtype)
    out = heads.copy()
    out[..., real_at] = real
    out[..., imag_at] = imag
    return out.reshape(x.shape)


def rotate_by_table(table: Array, positions: Array, query: Array, key: Array | None, *, head_size: int,
                    rotary_dim: int, neox: bool) -> tuple[Array, Array | None]:
    """query and key rotated by the rows of ``table`` ([max_position, rotary_dim]: cos, then sin) at ``positions``,
    the table cast to the query's dtype, each product and sum rounded to it (NR-3.1..NR-3.5)."""
    table = table.astype(query.dtype)
    rows = table[np.asarray(positions).reshape(-1)]
    cos, sin = rows[:, : rotary_dim // 2], rows[:, rotary_dim // 2:]
    return (_rotated(query, cos, sin, head_size, rotary_dim, neox),
            None if key is None else _rotated(key, cos, sin, head_size, rotary_dim, neox))


def rope_forward(positions: Array, query: Array, key: Array | None, *, head_size: int, rotary_dim: int,
                 max_position: int, base: float, neox: bool) -> tuple[Array, Array | None]:
    """rotate_by_table on the exact table rounded to float32 once (not vLLM's float32 arithmetic, whose pow is the
    platform's: the gate's NMSE bound covers the difference)."""
    return rotate_by_table(cos_sin_cache(rotary_dim, max_position, base), positions, query, key, head_size=head_size,
                           rotary_dim=rotary_dim, neox=neox)
