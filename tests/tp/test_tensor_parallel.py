"""Unit tests of impl/distributed/tensor_parallel.py and impl/model_executor/loaded_model.py."""
from __future__ import annotations

import threading
from typing import Any

import pytest
import torch

from impl.distributed.parallel_layout import ParallelDims, rank_group
from impl.distributed.tensor_parallel import (
    TensorParallel, current_tensor_parallel, current_tp_rank, current_tp_world_size, set_current_tensor_parallel,
    use_tensor_parallel,
)
from impl.model_executor.loaded_model import LoadedModel

pytestmark = pytest.mark.cpu


def handle(tp: int, rank: int, communicator: Any = None) -> TensorParallel:
    return TensorParallel(rank_group(ParallelDims(tp=tp), rank, "tp"), communicator)


class Recording:
    """A communicator that records each collective and answers with a marker tensor."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        self.calls.append(("all_reduce",))
        return tensor * 2

    def all_gather(self, tensor: torch.Tensor, dim: int) -> torch.Tensor:
        self.calls.append(("all_gather", dim))
        return torch.cat([tensor, tensor], dim)

    def reduce_scatter(self, tensor: torch.Tensor, dim: int) -> torch.Tensor:
        self.calls.append(("reduce_scatter", dim))
        return tensor.narrow(dim, 0, 1)

    def broadcast(self, tensor: torch.Tensor, src: int) -> torch.Tensor:
        self.calls.append(("broadcast", src))
        return tensor + src


@pytest.fixture(autouse=True)
def no_handle_leaks() -> Any:
    set_current_tensor_parallel(None)
    yield
    set_current_tensor_parallel(None)


def test_rank_and_size_come_from_the_group() -> None:
    tp = handle(4, 3)
    assert (tp.rank, tp.world_size) == (3, 4)


def test_singleton_collectives_return_their_input() -> None:
    tp, x = handle(1, 0), torch.ones(2, 3)
    assert tp.all_reduce(x) is x and tp.all_gather(x, 1) is x and tp.reduce_scatter(x, 0) is x and tp.broadcast(x) is x


def test_multi_rank_collectives_use_the_communicator() -> None:
    comm = Recording()
    tp, x = handle(2, 1, comm), torch.ones(2, 2)
    assert torch.equal(tp.all_reduce(x), x * 2)
    assert tp.all_gather(x, 0).shape == (4, 2)
    assert tp.reduce_scatter(x, -1).shape == (2, 1)
    assert torch.equal(tp.broadcast(x, 1), x + 1)
    assert comm.calls == [("all_reduce",), ("all_gather", 0), ("reduce_scatter", -1), ("broadcast", 1)]


def test_multi_rank_without_communicator_raises() -> None:
    for collective, args in (("all_reduce", ()), ("all_gather", (0,)), ("reduce_scatter", (0,)), ("broadcast", (0,))):
        with pytest.raises(RuntimeError, match=f"TensorParallel.{collective}: the TP group has 2 ranks but no communicator"):
            getattr(handle(2, 0), collective)(torch.ones(2), *args)


def test_bad_collective_arguments() -> None:
    tp = handle(1, 0)
    with pytest.raises(TypeError, match="tensor must be a torch.Tensor, got list"):
        tp.all_reduce([1.0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"all_gather: dim must be an int in \[-2, 1\], got 2"):
        tp.all_gather(torch.ones(2, 2), 2)
    with pytest.raises(ValueError, match="at least one dimension"):
        tp.reduce_scatter(torch.tensor(1.0), 0)
    with pytest.raises(ValueError, match=r"broadcast: src must be an int in \[0, 0\], got 1"):
        tp.broadcast(torch.ones(1), 1)
    with pytest.raises(ValueError, match="got True"):
        tp.broadcast(torch.ones(1), True)


def test_handle_validation() -> None:
    with pytest.raises(TypeError, match="TensorParallel.group must be a RankGroup"):
        TensorParallel([0, 1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="TensorParallel.communicator must be None or provide all_reduce"):
        handle(2, 0, communicator=object())
    with pytest.raises(TypeError, match="current tensor parallel must be a TensorParallel or None, got 1"):
        set_current_tensor_parallel(1)  # type: ignore[arg-type]


def test_unset_defaults_and_set_returns_previous() -> None:
    assert (current_tensor_parallel(), current_tp_rank(), current_tp_world_size()) == (None, 0, 1)
    first, second = handle(4, 1), handle(4, 2)
    assert set_current_tensor_parallel(first) is None
    assert set_current_tensor_parallel(second) is first
    assert (current_tensor_parallel(), current_tp_rank(), current_tp_world_size()) == (second, 2, 4)


def test_tp1_handle_is_inert() -> None:
    set_current_tensor_parallel(handle(1, 0))
    assert (current_tp_rank(), current_tp_world_size()) == (0, 1)


def test_sibling_threads_keep_their_own_handles() -> None:
    barrier = threading.Barrier(4, timeout=10)
    seen: dict[int, tuple] = {}

    def rank_thread(rank: int) -> None:
        set_current_tensor_parallel(handle(4, rank))
        barrier.wait()
        seen[rank] = (current_tp_rank(), current_tp_world_size())

    set_current_tensor_parallel(handle(2, 1))
    threads = [threading.Thread(target=rank_thread, args=(r,)) for r in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert seen == {r: (r, 4) for r in range(4)}
    assert (current_tp_rank(), current_tp_world_size()) == (1, 2)  # the main thread's own handle is untouched


def test_scope_restores_even_on_error() -> None:
    outer, inner = handle(2, 0), handle(2, 1)
    set_current_tensor_parallel(outer)
    with pytest.raises(KeyError):
        with use_tensor_parallel(inner) as active:
            assert active is inner and current_tensor_parallel() is inner
            raise KeyError("inside")
    assert current_tensor_parallel() is outer


def test_loaded_model_carries_an_optional_handle() -> None:
    plain = LoadedModel(torch.nn.Linear(2, 2))
    assert plain.tensor_parallel is None and (plain.tp_rank, plain.tp_world_size) == (0, 1)
    sharded = LoadedModel(torch.nn.Linear(2, 2), tensor_parallel=handle(2, 1))
    with sharded.activate() as active:
        assert active is sharded and current_tensor_parallel() is sharded.tensor_parallel and current_tp_rank() == 1
    assert current_tensor_parallel() is None
    with pytest.raises(TypeError, match="LoadedModel.model must be a torch.nn.Module, got str"):
        LoadedModel("model")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="LoadedModel.tensor_parallel must be a TensorParallel or None"):
        LoadedModel(torch.nn.Identity(), tensor_parallel=rank_group(ParallelDims(), 0, "tp"))  # type: ignore[arg-type]
