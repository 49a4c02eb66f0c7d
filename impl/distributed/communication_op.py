"""The collectives the TP-W2 rank code calls on the default torch.distributed group (spec/tensor-parallel.md TP-5.1
to TP-5.4; vLLM's tensor_model_parallel_all_reduce / _all_gather): no-ops in a one-rank world."""
from __future__ import annotations

import torch
import torch.distributed as dist


def world_size() -> int:
    """The default group's size; 1 where no group is initialized."""
    return dist.get_world_size() if dist.is_initialized() else 1


def all_reduce(tensor: torch.Tensor) -> torch.Tensor:
    """The sum of ``tensor`` over every rank (TP-5.2); ``tensor`` itself at tp 1."""
    if world_size() == 1:
        return tensor
    reduced = tensor.contiguous()
    dist.all_reduce(reduced, op=dist.ReduceOp.SUM)
    return reduced


def all_gather(tensor: torch.Tensor, dim: int) -> torch.Tensor:
    """Every rank's ``tensor`` concatenated along ``dim`` in rank order (TP-5.1, TP-5.4); ``tensor`` itself at tp 1."""
    size = world_size()
    if size == 1:
        return tensor
    if not -tensor.dim() <= dim < tensor.dim():
        raise ValueError(f"all_gather: dim must be an int in [{-tensor.dim()}, {tensor.dim() - 1}], got {dim}")
    part = tensor.contiguous()
    gathered = [torch.empty_like(part) for _ in range(size)]
    dist.all_gather(gathered, part)
    return torch.cat(gathered, dim=dim)
