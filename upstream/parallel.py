"""vLLM's rank layout as plain data: the group tables of ``initialize_model_parallel`` and ParallelConfig's size
validation (BACKEND-DISTRIBUTED-TP TP-W1).

``dims`` is the TP row's mapping of ParallelDims sizes ``{tp, pcp, pp, dp, external_dp, dcp}`` (absent: 1), as in
gates/rows/backend_distributed_tp/operations.yaml.

The tables come from vLLM's own ``initialize_model_parallel`` (vllm/distributed/parallel_state.py) with
``torch.distributed`` faked: ``is_initialized`` is true, the world has ``external_dp * dp * pp * pcp * tp`` ranks and
this process is rank 0, the world group is a stand-in, the current VllmConfig is a stand-in holding
``data_parallel_size`` (no elastic EP, no EPLB, no Engram, no model config, so the EP group is built as for an MoE
model), and ``init_model_parallel_group`` records the rank lists vLLM passes it instead of creating process groups.
No process is started and no communicator is created; the module's group globals are restored afterwards.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from functools import lru_cache
from types import SimpleNamespace
from typing import Any, Iterator, Mapping
from unittest import mock

import upstream  # noqa: F401  (environment before vLLM's import)

import torch
import vllm.config
import vllm.distributed.parallel_state as parallel_state

KINDS: tuple[str, ...] = ("tp", "dcp", "pcp", "pp", "dp", "ep")
"""The six group kinds the TP row gates, by vLLM's ``group_name``."""
DIMS = ("tp", "pcp", "pp", "dp", "external_dp", "dcp")
_GROUP_GLOBALS = ("_TP", "_ETP", "_ENGRAM_DP", "_DCP", "_PCP", "_PP", "_DP", "_EP", "_EPLB")
_LOCK = threading.Lock()


def _sizes(dims: Mapping[str, Any]) -> dict[str, int]:
    unknown = set(dims) - set(DIMS)
    if unknown:
        raise ValueError(f"unknown dims {sorted(unknown)}; known: {list(DIMS)}")
    return {name: dims.get(name, 1) for name in DIMS}


@contextmanager
def _faked_world(world_size: int, data_parallel_size: int) -> Iterator[list[tuple[str, list[list[int]]]]]:
    """torch.distributed and vLLM's world group faked for one ``initialize_model_parallel`` call; yields the record
    of (group_name, group_ranks) in creation order."""
    record: list[tuple[str, list[list[int]]]] = []

    def init_model_parallel_group(group_ranks, local_rank, backend, use_message_queue_broadcaster=False,
                                  group_name=None, use_device_communicator=True, use_all2all=False):
        ranks = [list(map(int, group)) for group in group_ranks]
        record.append((str(group_name), ranks))
        mine = next((group for group in ranks if 0 in group), [0])
        return SimpleNamespace(ranks=mine, rank_in_group=mine.index(0), world_size=len(mine), destroy=lambda: None)

    world = SimpleNamespace(local_rank=0, rank=0, world_size=world_size, device_group=None, backend="gloo",
                            destroy=lambda: None)
    config = SimpleNamespace(
        parallel_config=SimpleNamespace(data_parallel_size=data_parallel_size, enable_elastic_ep=False,
                                        use_all2all=False, enable_eplb=False),
        engram_config=None, model_config=None)
    # A release without one of these groups (0.25.0 has no _ETP or _ENGRAM_DP) is left without it.
    saved = {name: getattr(parallel_state, name) for name in _GROUP_GLOBALS + ("_WORLD",) if hasattr(parallel_state, name)}
    try:
        for name in _GROUP_GLOBALS:
            if name in saved:
                setattr(parallel_state, name, None)
        parallel_state._WORLD = world
        with mock.patch.object(torch.distributed, "is_initialized", lambda: True), \
                mock.patch.object(torch.distributed, "get_world_size", lambda *a, **k: world_size), \
                mock.patch.object(torch.distributed, "get_rank", lambda *a, **k: 0), \
                mock.patch.object(torch.distributed, "get_backend", lambda *a, **k: "gloo"), \
                mock.patch.object(parallel_state, "init_model_parallel_group", init_model_parallel_group), \
                mock.patch.object(vllm.config, "get_current_vllm_config", lambda: config):
            yield record
    finally:
        for name, value in saved.items():
            setattr(parallel_state, name, value)


@lru_cache(maxsize=256)
def _tables(tp: int, pcp: int, pp: int, dp: int, external_dp: int, dcp: int) -> tuple[tuple[str, tuple], ...]:
    world = external_dp * dp * pp * pcp * tp
    with _LOCK, _faked_world(world, dp) as record:
        parallel_state.initialize_model_parallel(
            tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
            prefill_context_model_parallel_size=pcp, decode_context_model_parallel_size=dcp, backend="gloo")
    return tuple((name, tuple(tuple(group) for group in groups)) for name, groups in record)


def group_tables(dims: Mapping[str, Any]) -> dict[str, list[list[int]]]:
    """Every group table ``initialize_model_parallel`` (vllm/distributed/parallel_state.py) builds for ``dims``,
    by group name in creation order (tp, dcp, pcp, pp, dp, ep; etp/edp/eplb only when vLLM builds them).

    vLLM itself does not check dcp here; sizes vLLM's reshape cannot take raise its RuntimeError.
    """
    sizes = _sizes(dims)
    return {name: [list(group) for group in groups] for name, groups in _tables(**sizes)}


def creation_order(dims: Mapping[str, Any]) -> list[str]:
    """The group names in the order vLLM creates them (vllm/distributed/parallel_state.py)."""
    return [name for name, _ in _tables(**_sizes(dims))]


def group_ranks(dims: Mapping[str, Any], kind: str) -> list[list[int]]:
    """The ``kind`` groups of ``initialize_model_parallel`` (vllm/distributed/parallel_state.py): the rank lists it
    passes to ``init_model_parallel_group`` for that group name, in order; the port's group-ranks operation."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not a group kind; accepted: {', '.join(KINDS)}")
    tables = group_tables(dims)
    if kind not in tables:
        raise ValueError(f"vLLM built no {kind} group for {dict(dims)}")
    return tables[kind]


def rank_groups(dims: Mapping[str, Any], kind: str) -> list[list]:
    """For every rank in rank order: [the members of its ``kind`` group, its index in them], read off vLLM's table
    (vllm/distributed/parallel_state.py); the port's rank-groups operation."""
    table = group_ranks(dims, kind)
    world = sum(len(group) for group in table)
    found: list[Any] = [None] * world
    for members in table:
        for index, rank in enumerate(members):
            found[rank] = [members, index]
    return found


def parallel_config_outcome(dims: Mapping[str, Any]) -> dict[str, Any]:
    """Whether ``vllm.config.ParallelConfig`` (vllm/config/parallel.py) accepts these sizes.

    Builds ``ParallelConfig(tensor_parallel_size=tp, pipeline_parallel_size=pp, prefill_context_parallel_size=pcp,
    decode_context_parallel_size=dcp, data_parallel_size=dp)`` (external_dp is no ParallelConfig field, it is
    ignored). Returns ``{accepted: true, world_size: tp*pp*pcp}`` or ``{accepted: false, error: class name,
    message: vLLM's text}``. A dp > 1 config reserves free local ports, as vLLM's own constructor does.
    """
    from vllm.config import ParallelConfig

    sizes = _sizes(dims)
    try:
        config = ParallelConfig(tensor_parallel_size=sizes["tp"], pipeline_parallel_size=sizes["pp"],
                                prefill_context_parallel_size=sizes["pcp"],
                                decode_context_parallel_size=sizes["dcp"], data_parallel_size=sizes["dp"])
    except (ValueError, TypeError) as exc:
        message = str(exc)
        errors = getattr(exc, "errors", None)
        if callable(errors):  # pydantic's ValidationError: the validator's own message
            try:
                message = "; ".join(str(e.get("msg", "")) for e in errors())
            except Exception:  # noqa: BLE001
                pass
        return {"accepted": False, "error": type(exc).__name__, "message": message}
    return {"accepted": True, "world_size": int(config.world_size)}


def accepts(dims: Mapping[str, Any]) -> bool:
    """``parallel_config_outcome(dims)["accepted"]`` (vllm/config/parallel.py)."""
    return bool(parallel_config_outcome(dims)["accepted"])
