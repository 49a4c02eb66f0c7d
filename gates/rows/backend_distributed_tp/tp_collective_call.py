"""The tp-collective-call operation's helpers (TP-2.2, TP-2.6): one collective of a rank's handle, its communicator
replaced by a recorder, and two known-bads.

A handle of a group of two or more ranks hands each collective to its communicator with the caller's tensor and
argument, and returns the communicator's tensor; a one-rank handle returns its input; bad dims and srcs are refused
first. The recorder stands for the backend, so what the handle forwards is judged without a process group.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from impl.distributed.parallel_layout import ParallelDims, RankGroup, rank_group
from impl.distributed.tensor_parallel import TensorParallel

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


class Recorder:
    """A communicator that records the one call it gets and answers with a tensor of its own."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, torch.Tensor, tuple[int, ...]]] = []
        self.answer = torch.full((1,), -1.0)

    def _record(self, name: str, tensor: torch.Tensor, *args: int) -> torch.Tensor:
        self.calls.append((name, tensor, args))
        return self.answer

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        return self._record("all_reduce", tensor)

    def all_gather(self, tensor: torch.Tensor, dim: int) -> torch.Tensor:
        return self._record("all_gather", tensor, dim)

    def reduce_scatter(self, tensor: torch.Tensor, dim: int) -> torch.Tensor:
        return self._record("reduce_scatter", tensor, dim)

    def broadcast(self, tensor: torch.Tensor, src: int) -> torch.Tensor:
        return self._record("broadcast", tensor, src)


def caller(make: Callable[[RankGroup, Recorder], Any]) -> Callable[..., dict[str, Any]]:
    """A ``(tp, collective, shape, rank=0, arg=None)`` function over the handles ``make`` builds."""

    def call(tp: int, collective: str, shape: Sequence[int] | None, rank: int = 0, arg: int | None = None) -> dict[str, Any]:
        if collective not in COLLECTIVES:
            raise ValueError(f"collective={collective!r} is not a collective; accepted: {', '.join(COLLECTIVES)}")
        recorder = Recorder()
        handle = make(rank_group(ParallelDims(tp=tp), rank, "tp"), recorder)
        tensor = None if shape is None else torch.zeros(tuple(shape))
        result = getattr(handle, collective)(tensor, *(() if arg is None else (arg,)))
        if len(recorder.calls) > 1:
            raise AssertionError(f"the communicator was called {len(recorder.calls)} times: {recorder.calls}")
        forwarded = None
        if recorder.calls:
            name, given, args = recorder.calls[0]
            forwarded = {"collective": name, "args": list(args), "tensor": "input" if given is tensor else "other"}
        returned = "input" if result is tensor else "communicator" if result is recorder.answer else "other"
        return {"forwarded": forwarded, "returned": returned}

    return call


tp_collective_call = caller(TensorParallel)
"""The impl's handle, its communicator a recorder."""


class _SingletonAboveOne(TensorParallel):
    def _collective(self, name: str, tensor: torch.Tensor, *args: int) -> torch.Tensor:
        return tensor  # treats every group as a one-rank group


class _DefaultDim(TensorParallel):
    def all_gather(self, tensor: torch.Tensor, dim: int = -1) -> torch.Tensor:
        return super().all_gather(tensor)  # the caller's dim dropped


groups_above_one_return_input = caller(_SingletonAboveOne)
"""Known-bad: a group of two or more ranks returns the input, as a one-rank group does."""

all_gather_drops_dim = caller(_DefaultDim)
"""Known-bad: all_gather forwards the default dim, not the caller's."""
