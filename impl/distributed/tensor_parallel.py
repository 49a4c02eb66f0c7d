"""The per-rank tensor-parallel handle and the thread-local current one (TP-2.1 to TP-2.4).

Mirrors GroupCoordinator's singleton bypass in vllm/distributed/parallel_state.py and the C++ port's
include/vllm/model_executor/models/tensor_parallel.h (one thread per rank, so the slot is thread-local).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Protocol, runtime_checkable

import torch

from impl.distributed.parallel_layout import RankGroup


@runtime_checkable
class Communicator(Protocol):
    """The collectives of a group with more than one rank (a gloo, NCCL or in-process backend)."""

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor: ...
    def all_gather(self, tensor: torch.Tensor, dim: int) -> torch.Tensor: ...
    def reduce_scatter(self, tensor: torch.Tensor, dim: int) -> torch.Tensor: ...
    def broadcast(self, tensor: torch.Tensor, src: int) -> torch.Tensor: ...


@dataclass(frozen=True)
class TensorParallel:
    """One rank's view of its TP group: rank and size, and the group's collectives."""

    group: RankGroup
    communicator: Communicator | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.group, RankGroup):
            raise TypeError(f"TensorParallel.group must be a RankGroup, got {self.group!r} ({type(self.group).__name__})")
        if self.communicator is not None and not isinstance(self.communicator, Communicator):
            raise TypeError(
                "TensorParallel.communicator must be None or provide all_reduce, all_gather, reduce_scatter "
                f"and broadcast, got {self.communicator!r} ({type(self.communicator).__name__})"
            )

    @property
    def rank(self) -> int:
        """This rank's index in the TP group."""
        return self.group.local_rank

    @property
    def world_size(self) -> int:
        """Number of ranks in the TP group."""
        return self.group.world_size

    def _collective(self, name: str, tensor: torch.Tensor, *args: int) -> torch.Tensor:
        """A one-rank group returns ``tensor`` itself; a larger one needs its communicator."""
        if self.world_size == 1:
            return tensor
        if self.communicator is None:
            raise RuntimeError(
                f"TensorParallel.{name}: the TP group has {self.world_size} ranks but no communicator; "
                "only a one-rank group runs collectives without one"
            )
        return getattr(self.communicator, name)(tensor, *args)

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum over the group; a one-rank group returns ``tensor`` itself."""
        _check_tensor("all_reduce", tensor)
        return self._collective("all_reduce", tensor)

    def all_gather(self, tensor: torch.Tensor, dim: int = -1) -> torch.Tensor:
        """Concatenate every rank's ``tensor`` along ``dim``; a one-rank group returns ``tensor`` itself."""
        _check_dim("all_gather", tensor, dim)
        return self._collective("all_gather", tensor, dim)

    def reduce_scatter(self, tensor: torch.Tensor, dim: int = -1) -> torch.Tensor:
        """Sum over the group and keep this rank's slice of ``dim``; a one-rank group returns ``tensor`` itself."""
        _check_dim("reduce_scatter", tensor, dim)
        return self._collective("reduce_scatter", tensor, dim)

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        """Every rank gets group rank ``src``'s ``tensor``; a one-rank group returns ``tensor`` itself."""
        _check_tensor("broadcast", tensor)
        if isinstance(src, bool) or not isinstance(src, int) or not 0 <= src < self.world_size:
            raise ValueError(f"TensorParallel.broadcast: src must be an int in [0, {self.world_size - 1}], got {src!r}")
        return self._collective("broadcast", tensor, src)


def _check_tensor(collective: str, tensor: object) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"TensorParallel.{collective}: tensor must be a torch.Tensor, got {type(tensor).__name__}")


def _check_dim(collective: str, tensor: torch.Tensor, dim: object) -> None:
    _check_tensor(collective, tensor)
    ndim = tensor.dim()
    if ndim == 0:
        raise ValueError(f"TensorParallel.{collective}: tensor must have at least one dimension, got a 0-d tensor")
    if isinstance(dim, bool) or not isinstance(dim, int) or not -ndim <= dim < ndim:
        raise ValueError(f"TensorParallel.{collective}: dim must be an int in [{-ndim}, {ndim - 1}], got {dim!r}")


_SLOT = threading.local()


def check_handle(field: str, value: object) -> TensorParallel | None:
    """Return ``value`` if it is a TensorParallel or None; raise naming ``field`` otherwise."""
    if value is not None and not isinstance(value, TensorParallel):
        raise TypeError(f"{field} must be a TensorParallel or None, got {value!r} ({type(value).__name__})")
    return value


def handle_rank(tp: TensorParallel | None) -> int:
    """The TP rank a handle stands for: 0 for no handle."""
    return 0 if tp is None else tp.rank


def handle_world_size(tp: TensorParallel | None) -> int:
    """The TP size a handle stands for: 1 for no handle."""
    return 1 if tp is None else tp.world_size


def set_current_tensor_parallel(tp: TensorParallel | None) -> TensorParallel | None:
    """Make ``tp`` this thread's current handle (None clears it); return the previous one."""
    check_handle("current tensor parallel", tp)
    previous = current_tensor_parallel()
    _SLOT.handle = tp
    return previous


def current_tensor_parallel() -> TensorParallel | None:
    """This thread's current handle; None until the thread sets one (other threads' handles are not seen)."""
    return getattr(_SLOT, "handle", None)


def current_tp_rank() -> int:
    """This thread's TP rank: 0 when no handle is set."""
    return handle_rank(current_tensor_parallel())


def current_tp_world_size() -> int:
    """This thread's TP size: 1 when no handle is set."""
    return handle_world_size(current_tensor_parallel())


@contextmanager
def use_tensor_parallel(tp: TensorParallel | None) -> Iterator[TensorParallel | None]:
    """Make ``tp`` current for the ``with`` block, then restore the handle that was current before."""
    previous = set_current_tensor_parallel(tp)
    try:
        yield tp
    finally:
        set_current_tensor_parallel(previous)
