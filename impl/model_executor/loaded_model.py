"""The engine's loaded model with its optional per-rank TP handle (TP-2.5).

Mirrors the model object vllm/model_executor/model_loader hands the runner; the C++ port adds the handle.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch

from impl.distributed.tensor_parallel import (
    TensorParallel, check_handle, handle_rank, handle_world_size, use_tensor_parallel,
)


@dataclass(frozen=True)
class LoadedModel:
    """A loaded model and, when tensor parallel, the handle of the rank it was loaded for."""

    model: torch.nn.Module
    tensor_parallel: TensorParallel | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.model, torch.nn.Module):
            raise TypeError(f"LoadedModel.model must be a torch.nn.Module, got {type(self.model).__name__}")
        check_handle("LoadedModel.tensor_parallel", self.tensor_parallel)

    @property
    def tp_rank(self) -> int:
        """The rank this model was loaded for: 0 without a handle."""
        return handle_rank(self.tensor_parallel)

    @property
    def tp_world_size(self) -> int:
        """The TP size this model was loaded for: 1 without a handle."""
        return handle_world_size(self.tensor_parallel)

    @contextmanager
    def activate(self) -> Iterator[LoadedModel]:
        """Make this model's handle the calling thread's current one for the block (its rank thread)."""
        with use_tensor_parallel(self.tensor_parallel):
            yield self
