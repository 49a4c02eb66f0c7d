"""Known-good RMSNorm and RoPE ports (spec/layers-norm-rope.md; docs/gate-files.md, "Known-goods"): legitimate
implementations that differ from the Python port in where they round, which every gate of the row must pass.

- ``rms_norm_fused``: what a fused CUDA kernel or a C++ port does: x (+ residual) lifted to float32, the mean of
  squares, the scale and the weight multiply all in float32, the result rounded to x's dtype once (vLLM's native
  path rounds the scaled row to the weight's dtype first, then the product: two roundings).
- ``rms_norm_float64``: the whole row in float64, rounded once to x's dtype.
- ``rope_own_table``: the rotation as NR-3.3 says (each product and sum rounded to the query's dtype), gathered by
  an index map, on a table whose inv_freq is correctly rounded (the Python port's is torch's pow).
- ``rope_fused``: a rotation computed in float32 (x·cos − y·sin on float32 operands) and rounded once, on the
  float32 table, as a fused kernel that keeps its arithmetic in registers does, and vLLM with
  `enable_fp32_compute` (NR-3.3 names the path without it).
- ``rope_float64``: the rotation in float64 on the exact table, rounded once. Neither round-once rotation is
  declared: in bfloat16 they differ from the oracle's per-step rounding by NMSE 4.9e-6 on average and up to
  4.5e-5 (1500 drawn examples, 276 of them bfloat16; 1.01e-5 and 1.19e-5 on the named cases
  llama-3-neox-bfloat16 and gptj-bfloat16), past the rotary-embedding gate's 1e-5.
- ``cos_sin_cache_correctly_rounded``: inv_freq taken in float64 and rounded to float32 once (a correctly rounded
  powf), the angles p·inv_freq in float32: the error model the rope-cos-sin-cache gate's atol is argued from.

None imports the port or the oracle: each validates its input itself, with the messages NR-1.5 and NR-3.6 name.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch


def _check_rms(x: torch.Tensor, weight: torch.Tensor | None, eps: float, residual: torch.Tensor | None) -> None:
    """NR-1.5's refusals, as ValueErrors naming the shapes or the value."""
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"rms_norm: x has shape {tuple(x.shape)}; its last axis (hidden) must hold at least one element")
    hidden = x.shape[-1]
    if weight is not None and tuple(weight.shape) != (hidden,):
        raise ValueError(f"rms_norm: weight has shape {tuple(weight.shape)}, expected ({hidden},) (x's hidden size)")
    if residual is not None and tuple(residual.shape) != tuple(x.shape):
        raise ValueError(f"rms_norm: residual has shape {tuple(residual.shape)}, expected x's {tuple(x.shape)}")
    if not math.isfinite(eps) or eps < 0:
        raise ValueError(f"rms_norm: eps={eps!r} must be a finite number >= 0")


def _rms_in(wide: torch.dtype, x: torch.Tensor, weight: torch.Tensor | None, eps: float,
            residual: torch.Tensor | None) -> Any:
    """RMSNorm with every step in ``wide`` and one rounding to x's dtype at the end (the new residual: the sum,
    rounded once)."""
    _check_rms(x, weight, eps, residual)
    total = x.to(wide) if residual is None else x.to(wide) + residual.to(wide)
    scale = torch.rsqrt(total.square().mean(dim=-1, keepdim=True) + eps)
    out = total * scale if weight is None else total * scale * weight.to(wide)
    out = out.to(x.dtype)
    return out if residual is None else (out, total.to(x.dtype))


def rms_norm_fused(x: torch.Tensor, weight: torch.Tensor | None, eps: float, residual: torch.Tensor | None = None) -> Any:
    """RMSNorm computed in float32 and rounded to x's dtype once (with a residual: normed, x + residual)."""
    return _rms_in(torch.float32, x, weight, eps, residual)


def rms_norm_float64(x: torch.Tensor, weight: torch.Tensor | None, eps: float, residual: torch.Tensor | None = None) -> Any:
    """RMSNorm computed in float64 and rounded to x's dtype once (with a residual: normed, x + residual)."""
    return _rms_in(torch.float64, x, weight, eps, residual)


def _check_table(rotary_dim: int, max_position: int, base: float) -> None:
    """NR-3.6's refusals of a table's configuration."""
    if rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(f"rotary_dim={rotary_dim} must be an even number >= 2")
    if max_position < 1:
        raise ValueError(f"max_position={max_position} must be >= 1")
    if not base > 1.0:
        raise ValueError(f"base={base!r} must be a number > 1")


def cos_sin_cache_correctly_rounded(rotary_dim: int, max_position: int, base: float) -> torch.Tensor:
    """The float32 table [max_position, rotary_dim], cos then sin, from inv_freq_j = base^(−2j/rotary_dim) taken in
    float64 and rounded to float32 once, the angles p·inv_freq_j multiplied in float32 (NR-2.1..NR-2.3)."""
    _check_table(rotary_dim, max_position, base)
    inv_freq = torch.tensor([float(base) ** (-2.0 * j / rotary_dim) for j in range(rotary_dim // 2)], dtype=torch.float64)
    angles = torch.arange(max_position, dtype=torch.float32)[:, None] * inv_freq.to(torch.float32)[None, :]
    return torch.cat((angles.cos(), angles.sin()), dim=-1)


def _exact_table(rotary_dim: int, max_position: int, base: float) -> torch.Tensor:
    """The float64 table: cos(p·θ_j) then sin(p·θ_j), θ_j = base^(−2j/rotary_dim), nothing rounded to float32."""
    _check_table(rotary_dim, max_position, base)
    theta = torch.tensor([float(base) ** (-2.0 * j / rotary_dim) for j in range(rotary_dim // 2)], dtype=torch.float64)
    angles = torch.arange(max_position, dtype=torch.float64)[:, None] * theta[None, :]
    return torch.cat((angles.cos(), angles.sin()), dim=-1)


def _rope_in(wide: torch.dtype | None, make_table: Callable[[int, int, float], torch.Tensor], positions: torch.Tensor,
             query: torch.Tensor, key: torch.Tensor | None, head_size: int, rotary_dim: int, max_position: int,
             base: float, neox: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """query and key rotated with the rows of ``make_table``'s table in ``wide`` arithmetic (None: the query's dtype,
    each product and sum rounded to it), each rounded to its dtype at the end."""
    if rotary_dim > head_size:
        raise ValueError(f"rotary_dim={rotary_dim} must be <= head_size={head_size}")
    table = make_table(rotary_dim, max_position, base)
    flat = positions.reshape(-1)
    if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= max_position):
        raise ValueError(f"positions must lie in [0, max_position={max_position}); got {int(flat.min())}..{int(flat.max())}")
    wide = wide or query.dtype
    rows = table[flat].to(wide)
    half = rotary_dim // 2
    cos, sin = rows[:, None, :half], rows[:, None, half:]
    real_at = torch.arange(half) if neox else torch.arange(half) * 2
    imag_at = real_at + half if neox else real_at + 1

    def rotated(x: torch.Tensor) -> torch.Tensor:
        tokens = flat.numel()
        if x.dim() != 2 or x.shape[0] != tokens or x.shape[1] % head_size:
            raise ValueError(f"a tensor of shape {tuple(x.shape)} is not [{tokens} tokens, heads * head_size={head_size}]")
        heads = x.reshape(tokens, -1, head_size).to(wide)
        a, b = heads[..., real_at], heads[..., imag_at]
        out = heads.clone()
        out[..., real_at] = a * cos - b * sin
        out[..., imag_at] = b * cos + a * sin
        return out.to(x.dtype).reshape(x.shape)

    return rotated(query), None if key is None else rotated(key)


def rope_own_table(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None, *, head_size: int,
                   rotary_dim: int, max_position: int, base: float, neox: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """query and key rotated as NR-3.3 says, each product and sum rounded to their dtype, on this module's own
    table (a correctly rounded inv_freq, where the port's is torch's pow): a port computing pow itself."""
    return _rope_in(None, cos_sin_cache_correctly_rounded, positions, query, key, head_size, rotary_dim, max_position,
                    base, neox)


def rope_fused(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None, *, head_size: int,
               rotary_dim: int, max_position: int, base: float, neox: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """query and key rotated in float32 on the float32 table and rounded to their dtype once (NR-3.1..NR-3.5)."""
    return _rope_in(torch.float32, cos_sin_cache_correctly_rounded, positions, query, key, head_size, rotary_dim,
                    max_position, base, neox)


def rope_float64(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None, *, head_size: int,
                 rotary_dim: int, max_position: int, base: float, neox: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """query and key rotated in float64 on the exact table and rounded to their dtype once (NR-3.1..NR-3.5)."""
    return _rope_in(torch.float64, _exact_table, positions, query, key, head_size, rotary_dim, max_position, base, neox)
