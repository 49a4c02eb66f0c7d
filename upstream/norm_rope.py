"""vLLM's own RMSNorm and rotary embedding on CPU (spec/layers-norm-rope.md): the rms-norm and rotary-embedding
operations answered by vLLM 0.33.0's RMSNorm.forward_native (vllm/model_executor/layers/layernorm.py, which calls
vllm/ir/ops/layernorm.py) and RotaryEmbedding.forward_native (vllm/model_executor/layers/rotary_embedding/base.py).

The layers are built under a default VllmConfig, in the input's dtype, with the given weight copied in.
"""
from __future__ import annotations

from typing import Any

import upstream  # noqa: F401  (environment before vLLM's import)

import torch
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float, residual: torch.Tensor | None = None) -> Any:
    """RMSNorm(hidden, eps, has_weight, dtype).forward_native(x, residual), weight loaded from ``weight``."""
    hidden = x.shape[-1]
    with set_current_vllm_config(VllmConfig()), torch.no_grad():
        layer = RMSNorm(hidden, eps=eps, has_weight=weight is not None,
                        dtype=x.dtype if weight is None else weight.dtype)
        if weight is not None:
            layer.weight.copy_(weight)
        return layer.forward_native(x.clone(), None if residual is None else residual.clone())


def rope_forward(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None, *, head_size: int,
                 rotary_dim: int, max_position: int, base: float, neox: bool) -> Any:
    """RotaryEmbedding(head_size, rotary_dim, max_position, base, neox, query's dtype).forward_native."""
    with set_current_vllm_config(VllmConfig()), torch.no_grad():
        layer = RotaryEmbedding(head_size, rotary_dim, max_position, base, neox, query.dtype)
        return layer.forward_native(positions, query.clone(), None if key is None else key.clone())
