"""Rotary position embedding as vLLM 0.33.0 computes it (spec/layers-norm-rope.md NR-2.1 to NR-3.5;
vllm/model_executor/layers/rotary_embedding/base.py RotaryEmbedding, common.py ApplyRotaryEmb.forward_static).

The cos/sin cache is a float32 table of max_position rows: row p holds cos(p * inv_freq) then sin(p * inv_freq),
inv_freq_j = 1 / base^(2j / rotary_dim). A forward gathers the rows of the positions, casts them to the query's
dtype, and rotates the first rotary_dim elements of every head: neox style pairs element i with i + rotary_dim/2,
GPT-J style pairs 2i with 2i + 1; the rest of the head passes through unchanged.
"""
from __future__ import annotations

import torch


def cos_sin_cache(rotary_dim: int, max_position: int, base: float) -> torch.Tensor:
    """The float32 table [max_position, rotary_dim]: cos of every angle, then sin (NR-2.1..NR-2.3)."""
    if rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(f"rotary_dim={rotary_dim} must be an even number >= 2")
    if max_position < 1:
        raise ValueError(f"max_position={max_position} must be >= 1")
    if not base > 1.0:
        raise ValueError(f"base={base!r} must be a number > 1")
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim
    inv_freq = 1.0 / (base ** exponents)
    angles = torch.outer(torch.arange(max_position, dtype=torch.float32), inv_freq)
    return torch.cat((angles.cos(), angles.sin()), dim=-1)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, neox: bool) -> torch.Tensor:
    """x [tokens, heads, rotary_dim] rotated pair by pair in x's dtype; cos, sin [tokens, rotary_dim/2] (NR-3.2, NR-3.3)."""
    cos = cos.unsqueeze(-2).to(x.dtype)
    sin = sin.unsqueeze(-2).to(x.dtype)
    if neox:
        first, second = torch.chunk(x, 2, dim=-1)
    else:
        first, second = x[..., 0::2], x[..., 1::2]
    rotated_first = first * cos - second * sin
    rotated_second = second * cos + first * sin
    if neox:
        return torch.cat((rotated_first, rotated_second), dim=-1)
    return torch.stack((rotated_first, rotated_second), dim=-1).flatten(-2)


def rotary_embedding(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None, head_size: int,
                     rotary_dim: int, cache: torch.Tensor, neox: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """query and key [tokens, heads * head_size] with each head's first rotary_dim elements rotated by the angles of
    its token's position (NR-3.1..NR-3.5); key may be None. The cache is cast to the query's dtype first."""
    if rotary_dim > head_size:
        raise ValueError(f"rotary_dim={rotary_dim} must be <= head_size={head_size}")
    positions = positions.flatten()
    if positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= cache.shape[0]):
        raise ValueError(f"positions must lie in [0, max_position={cache.shape[0]}); got "
                         f"{int(positions.min())}..{int(positions.max())}")
    table = cache.to(query.dtype).index_select(0, positions)
    cos, sin = table.chunk(2, dim=-1)
    return _rotate_heads(query, cos, sin, head_size, rotary_dim, neox), (
        None if key is None else _rotate_heads(key, cos, sin, head_size, rotary_dim, neox))


def _rotate_heads(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, head_size: int, rotary_dim: int,
                  neox: bool) -> torch.Tensor:
    """x [tokens, heads * head_size]: each head's rotary part rotated, the rest passed through, same shape."""
    tokens = cos.shape[0]
    if x.shape[-1] % head_size or x.numel() != tokens * x.shape[-1]:
        raise ValueError(f"a tensor of shape {tuple(x.shape)} is not [{tokens} tokens, heads * head_size={head_size}]")
    heads = x.view(tokens, -1, head_size)
    rotated = rotate(heads[..., :rotary_dim], cos, sin, neox)
    return torch.cat((rotated, heads[..., rotary_dim:]), dim=-1).reshape(x.shape)


def rope_forward(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None, *, head_size: int,
                 rotary_dim: int, max_position: int, base: float,
                 neox: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A rotary embedding built from its configuration and applied once, as vLLM's RotaryEmbedding(head_size,
    rotary_dim, max_position, base, is_neox_style, dtype).forward_native does (NR-2.x, NR-3.x)."""
    return rotary_embedding(positions, query, key, head_size, rotary_dim,
                            cos_sin_cache(rotary_dim, max_position, base), neox)
