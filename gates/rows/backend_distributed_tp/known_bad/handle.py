"""Known-bad current-TP handles: a process-global slot, a scope that clears instead of restoring, a tp=1 handle
whose collectives copy, and an unset world size of 0. Same signature as ``handle_scenario``.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Iterator

import torch

from impl.distributed.tensor_parallel import TensorParallel

from ..scenarios import IMPL_API, HandleApi, run_scenario


class _GlobalSlot:
    """One handle for the whole process, as vLLM's module global would be under one thread per rank."""

    handle: Any = None

    @classmethod
    def set(cls, tp: Any) -> Any:
        previous, cls.handle = cls.handle, tp
        return previous

    @classmethod
    def get(cls) -> Any:
        return cls.handle

    @classmethod
    @contextmanager
    def use(cls, tp: Any) -> Iterator[Any]:
        previous = cls.set(tp)
        try:
            yield tp
        finally:
            cls.set(previous)


_GLOBAL_API = HandleApi(
    TensorParallel, _GlobalSlot.set, _GlobalSlot.get,
    lambda: 0 if _GlobalSlot.get() is None else _GlobalSlot.get().rank,
    lambda: 1 if _GlobalSlot.get() is None else _GlobalSlot.get().world_size,
    _GlobalSlot.use,
)


def process_global_handle(scenario: str, tp: int = 1, rank: int = 0) -> Any:
    """The handle lives in a process-global slot: sibling rank threads see (and overwrite) each other's."""
    return run_scenario(_GLOBAL_API, scenario, tp, rank)


@contextmanager
def _use_then_clear(tp: Any) -> Iterator[Any]:
    IMPL_API.set_current(tp)
    try:
        yield tp
    finally:
        IMPL_API.set_current(None)


def scope_clears_instead_of_restoring(scenario: str, tp: int = 1, rank: int = 0) -> Any:
    """Leaving ``use_tensor_parallel`` clears the slot instead of restoring the outer handle."""
    return run_scenario(replace(IMPL_API, use=_use_then_clear), scenario, tp, rank)


class _CopyingTensorParallel(TensorParallel):
    """A tp=1 handle whose collectives return a copy instead of the input."""

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.clone() if self.world_size == 1 else super().all_reduce(tensor)


def singleton_all_reduce_copies(scenario: str, tp: int = 1, rank: int = 0) -> Any:
    """A one-rank all_reduce allocates a copy: not inert, unlike vLLM's bypass."""
    return run_scenario(replace(IMPL_API, make=_CopyingTensorParallel), scenario, tp, rank)


def unset_world_size_zero(scenario: str, tp: int = 1, rank: int = 0) -> Any:
    """With no handle, the TP world size reads 0 instead of 1."""
    size = IMPL_API.current_world_size
    return run_scenario(replace(IMPL_API, current_world_size=lambda: size() if IMPL_API.current() is not None else 0),
                        scenario, tp, rank)
