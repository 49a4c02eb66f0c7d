"""The floor of ci/bench/bench_tp_w2.py: the same per-rank forwards, with their gloo collectives, on the same worlds
of impl/distributed/gloo_world.py as the harness, with nothing moved per call. The configurations' tensors sit in
one shared-memory segment and each rank writes its results into another; each batch costs one wake (a semaphore
per rank) and one answer (a shared semaphore); the whole pass is one run_on_ranks call per tp.

Beside it, what no transport can remove: the pass's collectives, recorded as the forwards make them, replayed alone
back to back on the same world (``collectives_alone``).

Call ``prepare`` for a tp before that tp's world is first used: the ranks see the state they were forked with.
"""
from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.distributed as dist

from impl.distributed.gloo_world import run_on_ranks

Config = tuple[str, dict[str, Any]]
RankForward = Callable[[int, int, dict[str, Any]], Any]
Batch = tuple[int, int]

SLOTS = 3
"""The most tensors one forward returns (qkv: q, k, v)."""

ALIGN = 64
"""Byte alignment of each tensor in the shared segment (any dtype's element size divides it)."""

WAKE_TIMEOUT_S = 120.0
"""How long a rank waits for the next batch's wake, and the parent for a batch's answers, before giving up."""


@dataclass(frozen=True)
class FloorState:
    """What the ranks of one tp inherit at the fork: the shared inputs and result buffers, and the semaphores."""

    configs: list[Config]
    forwards: Mapping[str, RankForward]
    bounds: tuple[int, ...]
    results: torch.Tensor
    shapes: torch.Tensor
    go: tuple[Any, ...]
    done: Any


_states: dict[int, FloorState] = {}


def prepare(tp: int, configs: Sequence[Config], forwards: Mapping[str, RankForward], unsharded: Sequence[Any]) -> None:
    """Put ``configs`` for ``tp`` into shared memory with room for every rank's results (no rank's result of a
    configuration is larger than the unsharded one, ``unsharded``); before the world of ``tp`` is forked."""
    context = multiprocessing.get_context("fork")
    sizes = [sum(part.numel() for part in _parts(result)) for result in unsharded]
    bounds = tuple(sum(sizes[:index]) for index in range(len(sizes) + 1))
    _states[tp] = FloorState(
        configs=_shared(list(configs)), forwards=dict(forwards), bounds=bounds,
        results=torch.zeros(tp, bounds[-1], dtype=torch.float32).share_memory_(),
        shapes=torch.zeros(tp, len(sizes), 1 + 2 * SLOTS, dtype=torch.int64).share_memory_(),
        go=tuple(context.Semaphore(0) for _ in range(tp)), done=context.Semaphore(0))


def _parts(result: Any) -> list[torch.Tensor]:
    return list(result) if isinstance(result, (list, tuple)) else [result]


def _shared(configs: list[Config]) -> list[Config]:
    """The configurations again, each tensor copied into one shared-memory segment (one segment, not one per tensor)."""
    tensors = [tensor for _, payload in configs for tensor in _tensors(payload)]
    offsets, total = [], 0
    for tensor in tensors:
        offsets.append(total)
        total += -(-tensor.numel() * tensor.element_size() // ALIGN) * ALIGN
    segment = torch.zeros(max(total, 1), dtype=torch.uint8).share_memory_()
    views: dict[int, torch.Tensor] = {}
    for tensor, offset in zip(tensors, offsets):
        view = segment[offset:offset + tensor.numel() * tensor.element_size()].view(tensor.dtype).view(tensor.shape)
        views[id(tensor)] = view.copy_(tensor)
    return [(kind, _replace(payload, views)) for kind, payload in configs]


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [tensor for item in value for tensor in _tensors(item)]
    return []


def _replace(value: Any, views: dict[int, torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        return views[id(value)]
    if isinstance(value, dict):
        return {key: _replace(item, views) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_replace(item, views) for item in value)
    return value


def _state(tp: int) -> FloorState:
    state = _states.get(tp)
    if state is None:
        raise RuntimeError(f"tp_floor: no floor state for tp={tp} in this rank: prepare() must run before the world of "
                           f"tp={tp} is first used (its ranks see only what they were forked with)")
    return state


# The rank side -----------------------------------------------------------------------------------------------------


def _started(rank: int, tp: int, _: Any) -> None:
    """Nothing: the call only makes sure the world is up."""


def floor_pass(rank: int, tp: int, batches: list[Batch]) -> None:
    """On every rank: announce readiness, then for each batch wait for its wake, run its configurations' forwards
    (collectives included) and write the results into shared memory, then answer."""
    state = _state(tp)
    results, shapes = state.results[rank].numpy(), state.shapes[rank].numpy()
    state.done.release()
    for start, stop in batches:
        if not state.go[rank].acquire(timeout=WAKE_TIMEOUT_S):
            raise TimeoutError(f"tp_floor: rank {rank} of tp={tp} got no wake for batch [{start}, {stop}) within "
                               f"{WAKE_TIMEOUT_S} s")
        for index in range(start, stop):
            kind, payload = state.configs[index]
            _store(state.forwards[kind](rank, tp, payload), results, shapes[index], state.bounds, index)
        state.done.release()


def _store(result: Any, results: Any, shape: Any, bounds: tuple[int, ...], index: int) -> None:
    """One configuration's results into this rank's shared buffer, their shapes beside (numpy views, no torch call)."""
    parts = _parts(result)
    if len(parts) > SLOTS:
        raise ValueError(f"tp_floor: configuration {index} returned {len(parts)} tensors, at most {SLOTS} fit")
    shape[0] = len(parts) if isinstance(result, (list, tuple)) else 0
    offset = bounds[index]
    for slot, part in enumerate(parts):
        if part.dtype != torch.float32 or part.dim() != 2 or offset + part.numel() > bounds[index + 1]:
            raise ValueError(f"tp_floor: configuration {index} returned a {part.dtype} tensor of shape "
                             f"{tuple(part.shape)}; room is for 2-d float32 within {bounds[index + 1] - bounds[index]} "
                             f"elements")
        results[offset:offset + part.numel()] = part.numpy().reshape(-1)
        shape[1 + 2 * slot], shape[2 + 2 * slot] = part.shape
        offset += part.numel()


def collectives_alone(rank: int, tp: int, _: Any) -> tuple[int, float]:
    """On every rank: the collectives the pass's forwards make (recorded by running them once), replayed alone back
    to back; their count and the replay's seconds."""
    state = _state(tp)
    recorded: list[tuple[str, torch.Tensor]] = []
    originals = dist.all_reduce, dist.all_gather

    def all_reduce(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        recorded.append(("all_reduce", tensor.clone()))
        return originals[0](tensor, *args, **kwargs)

    def all_gather(outputs: list[torch.Tensor], tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        recorded.append(("all_gather", tensor.clone()))
        return originals[1](outputs, tensor, *args, **kwargs)

    dist.all_reduce, dist.all_gather = all_reduce, all_gather
    try:
        for kind, payload in state.configs:
            state.forwards[kind](rank, tp, payload)
    finally:
        dist.all_reduce, dist.all_gather = originals
    gathers = [[torch.empty_like(tensor) for _ in range(tp)] for _, tensor in recorded]
    dist.barrier()
    started = time.perf_counter()
    for (name, tensor), outputs in zip(recorded, gathers):
        if name == "all_reduce":
            dist.all_reduce(tensor)
        else:
            dist.all_gather(outputs, tensor)
    return len(recorded), time.perf_counter() - started


# The parent side ---------------------------------------------------------------------------------------------------


def run_floor(tp: int, batches: list[Batch], timeout_s: float) -> tuple[float, list[list[Any]]]:
    """The floor's seconds over ``batches`` (from each batch's wake to its last rank's answer, summed) and each
    configuration's per-rank results, read back from shared memory."""
    state = _state(tp)
    run_on_ranks(tp, _started, None, timeout_s=timeout_s)  # forked here if new: a rank dies with its forking thread
    with ThreadPoolExecutor(max_workers=1) as pool:
        call = pool.submit(run_on_ranks, tp, floor_pass, batches, timeout_s=timeout_s)
        for _ in range(tp):
            _answer(state, call)
        seconds = 0.0
        for _ in batches:
            started = time.perf_counter()
            for go in state.go:
                go.release()
            for _ in range(tp):
                _answer(state, call)
            seconds += time.perf_counter() - started
        call.result()
    return seconds, [[_result(state, rank, index) for rank in range(tp)] for index in range(len(state.configs))]


def _answer(state: FloorState, call: Future) -> None:
    """One rank's answer; the rank's error (or a RuntimeError) if the pass ended or stalled without it."""
    deadline = time.monotonic() + WAKE_TIMEOUT_S
    while not state.done.acquire(timeout=0.05):
        if call.done():
            call.result()
            raise RuntimeError("tp_floor: the floor's pass ended before every rank answered")
        if time.monotonic() > deadline:
            raise RuntimeError(f"tp_floor: no rank answer within {WAKE_TIMEOUT_S} s")


def _result(state: FloorState, rank: int, index: int) -> Any:
    """A rank's result of one configuration as it wrote it: a tensor, or a list of tensors."""
    shape = state.shapes[rank, index].tolist()
    count, offset, parts = shape[0], state.bounds[index], []
    for slot in range(max(count, 1)):
        rows, cols = shape[1 + 2 * slot], shape[2 + 2 * slot]
        parts.append(state.results[rank, offset:offset + rows * cols].view(rows, cols).clone())
        offset += rows * cols
    return parts if count else parts[0]
