"""Adapter for the current-TP-handle gate: run a named scenario on a fresh thread and report what it saw.

Each scenario drives a ``HandleApi`` (the impl's, or a known-bad one) the way the port's rank threads do.
"""
from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Callable

import torch

from impl.distributed import tensor_parallel as impl_tp
from impl.distributed.parallel_layout import ParallelDims, RankGroup, rank_group
from impl.model_executor.loaded_model import LoadedModel


@dataclass(frozen=True)
class HandleApi:
    """The handle type and the thread-local accessors a scenario exercises."""

    make: Callable[[RankGroup], Any]
    set_current: Callable[[Any], Any]
    current: Callable[[], Any]
    current_rank: Callable[[], int]
    current_world_size: Callable[[], int]
    use: Callable[[Any], AbstractContextManager]


IMPL_API = HandleApi(impl_tp.TensorParallel, impl_tp.set_current_tensor_parallel, impl_tp.current_tensor_parallel,
                     impl_tp.current_tp_rank, impl_tp.current_tp_world_size, impl_tp.use_tensor_parallel)


def _handle(api: HandleApi, tp: int, rank: int) -> Any:
    return api.make(rank_group(ParallelDims(tp=tp), rank, "tp"))


def _seen(api: HandleApi) -> list:
    """[is a handle set, current_tp_rank, current_tp_world_size] on the calling thread."""
    return [api.current() is not None, api.current_rank(), api.current_world_size()]


def _on_thread(body: Callable[[], Any]) -> Any:
    """Run ``body`` on a new thread (a rank thread) and return its result or raise its exception."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = body()
        except BaseException as exc:  # re-raised on the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=30)
    if thread.is_alive():
        raise TimeoutError("scenario thread did not finish in 30 s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _unset(api: HandleApi, tp: int, rank: int) -> Any:
    return _seen(api)


def _singleton(api: HandleApi, tp: int, rank: int) -> Any:
    handle = _handle(api, 1, 0)
    x = torch.arange(6.0).reshape(2, 3)
    same = {
        "all_reduce": handle.all_reduce(x) is x,
        "all_gather": handle.all_gather(x, 0) is x,
        "reduce_scatter": handle.reduce_scatter(x, -1) is x,
        "broadcast": handle.broadcast(x, 0) is x,
    }
    with api.use(handle):
        current = _seen(api)
    return {"rank": handle.rank, "world_size": handle.world_size, "returns_input": same, "current": current}


def _sibling_thread(api: HandleApi, tp: int, rank: int) -> Any:
    api.set_current(_handle(api, tp, rank))
    try:
        sibling = _on_thread(lambda: _seen(api))
        return {"own": _seen(api), "sibling": sibling}
    finally:
        api.set_current(None)


def _rank_threads(api: HandleApi, tp: int, rank: int) -> Any:
    barrier = threading.Barrier(tp, timeout=30)
    seen: list[Any] = [None] * tp
    errors: list[BaseException] = []

    def rank_thread(r: int) -> None:
        try:
            api.set_current(_handle(api, tp, r))
            barrier.wait()  # every rank's handle is set before any is read
            seen[r] = _seen(api)
            barrier.wait()
            api.set_current(None)
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=rank_thread, args=(r,), daemon=True) for r in range(tp)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    if errors:
        raise errors[0]
    return seen


def _scope_restores(api: HandleApi, tp: int, rank: int) -> Any:
    outer, inner = _handle(api, tp, rank), _handle(api, tp, (rank + 1) % tp)
    api.set_current(outer)
    try:
        with api.use(inner):
            inside = _seen(api)
        after = _seen(api)
        try:
            with api.use(inner):
                raise LookupError("raised inside the scope")
        except LookupError:
            pass
        after_raise = _seen(api)
        with api.use(None):
            cleared = _seen(api)
        return {"inside": inside, "after": after, "after_raise": after_raise, "cleared": cleared, "restored": _seen(api)}
    finally:
        api.set_current(None)


def _loaded_model(api: HandleApi, tp: int, rank: int) -> Any:
    """LoadedModel is wired to the impl's slot, so this scenario reads it through IMPL_API whatever ``api`` is."""
    plain = LoadedModel(torch.nn.Identity())
    sharded = LoadedModel(torch.nn.Identity(), tensor_parallel=_handle(IMPL_API, tp, rank))
    with sharded.activate():
        active = _seen(IMPL_API)
    return {"default_handle_set": plain.tensor_parallel is not None, "default": [plain.tp_rank, plain.tp_world_size],
            "sharded": [sharded.tp_rank, sharded.tp_world_size], "active": active, "after": _seen(IMPL_API)}


def _no_communicator(api: HandleApi, tp: int, rank: int) -> Any:
    return _handle(api, tp, rank).all_reduce(torch.ones(2))


SCENARIOS: dict[str, Callable[[HandleApi, int, int], Any]] = {
    "unset": _unset, "singleton": _singleton, "sibling-thread": _sibling_thread, "rank-threads": _rank_threads,
    "scope-restores": _scope_restores, "loaded-model": _loaded_model, "no-communicator": _no_communicator,
}


def run_scenario(api: HandleApi, scenario: str, tp: int, rank: int) -> Any:
    """Run ``scenario`` with ``api`` on a fresh thread, so no handle of the caller's thread leaks in."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {sorted(SCENARIOS)}")
    return _on_thread(lambda: SCENARIOS[scenario](api, tp, rank))


def handle_scenario(scenario: str, tp: int = 1, rank: int = 0) -> Any:
    """The impl's handle API through ``scenario``."""
    return run_scenario(IMPL_API, scenario, tp, rank)
