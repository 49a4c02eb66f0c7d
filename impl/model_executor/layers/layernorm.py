"""RMSNorm as vLLM 0.33.0 computes it (spec/layers-norm-rope.md NR-1.1 to NR-1.5; vllm/ir/ops/layernorm.py, the
native rms_norm and fused_add_rms_norm that RMSNorm.forward_native calls).

The input is lifted to float32, the mean of squares over the last axis is taken there, the row is scaled by
rsqrt(variance + eps) in float32, cast to the weight's dtype, multiplied by the weight, and cast back to the input's
dtype. With a residual, x + residual is summed in float32 first; the sum, cast to the input's dtype, is the new
residual, and the float32 sum is what is normalized.
"""
from __future__ import annotations

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float,
             residual: torch.Tensor | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm of ``x`` over its last axis (NR-1.1..NR-1.3); with ``residual``, (normed, x + residual) (NR-1.4)."""
    _check(x, weight, eps, residual)
    in_dtype = x.dtype
    wide = x.to(torch.float32)
    new_residual = None
    if residual is not None:
        wide = wide + residual.to(torch.float32)
        new_residual = wide.to(in_dtype)
    variance = wide.pow(2).mean(dim=-1, keepdim=True)
    normed = wide * torch.rsqrt(variance + eps)
    if weight is not None:
        normed = normed.to(weight.dtype) * weight
    out = normed.to(in_dtype)
    return out if new_residual is None else (out, new_residual)


def _check(x: torch.Tensor, weight: torch.Tensor | None, eps: float, residual: torch.Tensor | None) -> None:
    """The refusals of NR-1.5: a weight or residual whose shape does not fit x, a negative or non-finite eps."""
    if x.dim() < 1 or x.shape[-1] < 1:
        raise ValueError(f"rms_norm: x has shape {tuple(x.shape)}; its last axis (hidden) must hold at least one element")
    if weight is not None and tuple(weight.shape) != (x.shape[-1],):
        raise ValueError(f"rms_norm: weight has shape {tuple(weight.shape)}, expected ({x.shape[-1]},) (x's hidden size)")
    if residual is not None and residual.shape != x.shape:
        raise ValueError(f"rms_norm: residual has shape {tuple(residual.shape)}, expected x's {tuple(x.shape)}")
    if not (eps >= 0.0 and eps != float("inf")):
        raise ValueError(f"rms_norm: eps={eps!r} must be a finite number >= 0")
