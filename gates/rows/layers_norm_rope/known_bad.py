"""Known-bad RMSNorm and RoPE ports (spec/layers-norm-rope.md), each one defect a port of these layers tends to have;
every one has the signature of the target it replaces and must be rejected by a named gate (issue 29 item 7)."""
from __future__ import annotations

from typing import Any

import torch

from impl.model_executor.layers import rotary_embedding as rope


def _finish(wide: torch.Tensor, variance: torch.Tensor, weight: torch.Tensor | None, eps: float,
            in_dtype: torch.dtype, new_residual: torch.Tensor | None, *, eps_inside: bool = True) -> Any:
    """The correct tail of rms_norm from a given variance (eps inside the square root unless told otherwise)."""
    if eps_inside:
        normed = wide * torch.rsqrt(variance + eps)
    else:
        normed = wide / (torch.sqrt(variance) + eps)
    if weight is not None:
        normed = normed.to(weight.dtype) * weight
    out = normed.to(in_dtype)
    return out if new_residual is None else (out, new_residual)


def _sum_in_float32(x: torch.Tensor, residual: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    wide = x.to(torch.float32)
    if residual is None:
        return wide, None
    wide = wide + residual.to(torch.float32)
    return wide, wide.to(x.dtype)


def eps_outside_sqrt(x: torch.Tensor, weight: torch.Tensor | None, eps: float, residual: torch.Tensor | None = None) -> Any:
    """x / (sqrt(mean(x²)) + eps): the epsilon added outside the square root (NR-1.1)."""
    wide, new_residual = _sum_in_float32(x, residual)
    variance = wide.pow(2).mean(dim=-1, keepdim=True)
    return _finish(wide, variance, weight, eps, x.dtype, new_residual, eps_inside=False)


def float16_variance(x: torch.Tensor, weight: torch.Tensor | None, eps: float, residual: torch.Tensor | None = None) -> Any:
    """The mean of squares accumulated element by element in a float16 accumulator, as a kernel with a `half`
    accumulator does, where NR-1.2 requires float32 (it saturates at 65504 and stalls once the sum's spacing
    exceeds the squares it adds)."""
    wide, new_residual = _sum_in_float32(x, residual)
    squares = wide.pow(2).to(torch.float16)
    total = torch.zeros(squares.shape[:-1], dtype=torch.float16)
    for column in range(squares.shape[-1]):
        total = total + squares[..., column]
    variance = (total / squares.shape[-1]).to(torch.float32).unsqueeze(-1)
    return _finish(wide, variance, weight, eps, x.dtype, new_residual)


def residual_not_returned_updated(x: torch.Tensor, weight: torch.Tensor | None, eps: float,
                                  residual: torch.Tensor | None = None) -> Any:
    """The fused add normalizes x + residual but hands back the residual it was given (NR-1.4)."""
    wide, new_residual = _sum_in_float32(x, residual)
    variance = wide.pow(2).mean(dim=-1, keepdim=True)
    return _finish(wide, variance, weight, eps, x.dtype, None if residual is None else residual)


def residual_not_added(x: torch.Tensor, weight: torch.Tensor | None, eps: float, residual: torch.Tensor | None = None) -> Any:
    """The fused add returns the new residual but normalizes x alone (NR-1.4)."""
    _, new_residual = _sum_in_float32(x, residual)
    wide = x.to(torch.float32)
    return _finish(wide, wide.pow(2).mean(dim=-1, keepdim=True), weight, eps, x.dtype, new_residual)


def gptj_pairing_for_neox(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None, *, head_size: int,
                          rotary_dim: int, max_position: int, base: float, neox: bool) -> Any:
    """Pairs (2i, 2i+1) rotated even where neox style, (i, i + rotary_dim/2), is asked (NR-3.2)."""
    return rope.rope_forward(positions, query, key, head_size=head_size, rotary_dim=rotary_dim,
                             max_position=max_position, base=base, neox=False)


def neox_pairing_for_gptj(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None, *, head_size: int,
                          rotary_dim: int, max_position: int, base: float, neox: bool) -> Any:
    """Pairs (i, i + rotary_dim/2) rotated even where GPT-J style is asked (NR-3.2)."""
    return rope.rope_forward(positions, query, key, head_size=head_size, rotary_dim=rotary_dim,
                             max_position=max_position, base=base, neox=True)


def rotated_half_sign_flipped(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None, *,
                              head_size: int, rotary_dim: int, max_position: int, base: float, neox: bool) -> Any:
    """The rotated half taken with the wrong sign (x1·cos + x2·sin, x2·cos − x1·sin): a rotation by −θ (NR-3.3)."""
    cache = rope.cos_sin_cache(rotary_dim, max_position, base)
    cos, sin = cache.chunk(2, dim=-1)
    return rope.rotary_embedding(positions, query, key, head_size, rotary_dim, torch.cat((cos, -sin), dim=-1), neox)


def positions_as_token_index(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None, *,
                             head_size: int, rotary_dim: int, max_position: int, base: float, neox: bool) -> Any:
    """Token t rotated by position t, the positions given ignored (NR-3.1)."""
    ordinal = torch.arange(positions.numel(), dtype=positions.dtype) % max_position
    return rope.rope_forward(ordinal, query, key, head_size=head_size, rotary_dim=rotary_dim,
                             max_position=max_position, base=base, neox=neox)


def key_left_unrotated(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None, *, head_size: int,
                       rotary_dim: int, max_position: int, base: float, neox: bool) -> Any:
    """The query rotated, the key passed through (NR-3.4)."""
    rotated, _ = rope.rope_forward(positions, query, None, head_size=head_size, rotary_dim=rotary_dim,
                                   max_position=max_position, base=base, neox=neox)
    return rotated, key


def exponent_without_factor_two(rotary_dim: int, max_position: int, base: float) -> torch.Tensor:
    """inv_freq_j = base^(−j/rotary_dim) for j < rotary_dim/2: the exponent's 2j written j (NR-2.1)."""
    exponents = torch.arange(0, rotary_dim // 2, dtype=torch.float32) / rotary_dim
    angles = torch.outer(torch.arange(max_position, dtype=torch.float32), 1.0 / (base ** exponents))
    return torch.cat((angles.cos(), angles.sin()), dim=-1)


def sin_before_cos(rotary_dim: int, max_position: int, base: float) -> torch.Tensor:
    """The table's halves in the wrong order: sin, then cos (NR-2.2)."""
    cos, sin = rope.cos_sin_cache(rotary_dim, max_position, base).chunk(2, dim=-1)
    return torch.cat((sin, cos), dim=-1)


def rows_from_position_one(rotary_dim: int, max_position: int, base: float) -> torch.Tensor:
    """Row p holds the angles of position p + 1 (NR-2.2)."""
    return rope.cos_sin_cache(rotary_dim, max_position + 1, base)[1:]
