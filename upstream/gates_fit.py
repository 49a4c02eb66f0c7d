"""Views of vLLM 0.33.0 for the ROAD-V1-MEM upstream gates of the fit check and the memory profile (MEM-3.x), in the
shapes of the row's operations (gates/rows/road_v1_mem/operations.yaml).

- ``check_enough_kv_cache_memory``: ``upstream.kv_fit``'s (vllm/v1/core/kv_cache_planning.py: the null block held
  back, then vLLM's two refusals), on the row's fit shape; gate ``kv-fit-check:upstream``.
- ``available_kv_cache_memory``: ``Worker.determine_available_memory`` (vllm/v1/worker/gpu_worker.py) run on a
  PROFILE CASE with the device faked (``upstream.memory.worker_available_memory``), checked against the two
  profile deviations of spec/deviations.yaml first: where free memory grew during the profile vLLM's worker must
  still fail its ``assert`` (profile-free-memory-grew), and a budget <= 0 must still be returned and refused only by
  vLLM's fit check, with its no-memory message (profile-empty-budget-refused-early). A declaration that no longer
  holds raises ``AssertionError`` naming it; otherwise the answer is vLLM's number, or the ``ValueError`` the
  deviation declares for the port, with vLLM's own text. Gate ``profile-kv-budget:upstream``.
- ``requested_memory``: ``request_memory`` (vllm/v1/worker/utils.py) on a start-up reading.
- ``util_path_num_blocks``: the profiled utilization path end to end (MEM-3.3, MEM-3.5): the worker's KV budget
  (the byte knob, or the profile's), then the pool's block count as vLLM's planner takes it, the budget over one
  block of the one group (vllm/v1/core/kv_cache_planning.py ``get_kv_cache_configs``: ``available_memory //
  bytes_per_block``). Gate ``profile-util-blocks:upstream``.

vLLM is imported on the first call, not on import (see upstream/gates_mem.py).
"""
from __future__ import annotations

from typing import Any, Mapping

import upstream  # noqa: F401  (environment before vLLM's import)

# One small full-attention layer: the spec with which vLLM's fit check is asked about an empty budget.
_PROBE_LAYER = {"num_layers": 1, "block_size": 16, "num_kv_heads": 1, "head_size": 64, "dtype": "float16",
                "max_model_len": 16}


def check_enough_kv_cache_memory(num_layers: int, block_size: int, num_kv_heads: int, head_size: int, dtype: str,
                                 available_memory: int, max_model_len: int) -> None:
    """vLLM 0.33.0's ``check_enough_kv_cache_memory`` on the fit shape: None, or its ValueError."""
    from upstream import kv_fit

    kv_fit.check_enough_kv_cache_memory(num_layers, block_size, num_kv_heads, head_size, dtype, available_memory,
                                        max_model_len)


def _stale(deviation: str, declared: str, got: object) -> AssertionError:
    return AssertionError(f"spec/deviations.yaml {deviation} no longer holds: vLLM {upstream.installed_version()} was "
                          f"declared to {declared}, "
                          f"but gave {got!r}")


def _worker_outcome(case: Mapping[str, Any]) -> tuple[str, Any]:
    """("value", bytes) or ("assert", message) of vLLM's worker; its start-up ValueError propagates."""
    from upstream import memory

    try:
        return "value", memory.worker_available_memory(case)
    except AssertionError as exc:
        return "assert", str(exc)


def _free_grew(case: Mapping[str, Any]) -> bool:
    snapshots = case["snapshots"]
    return snapshots["before_create"]["free_memory"] < snapshots["after_profile"]["free_memory"]


def available_kv_cache_memory(case: Mapping[str, Any]) -> int:
    """vLLM's KV budget for a PROFILE CASE, or the refusal spec/deviations.yaml declares for the port (ValueError
    with vLLM's own text), after asserting that vLLM still behaves as declared."""
    kind, got = _worker_outcome(case)
    if _free_grew(case):
        if kind != "assert" or not got.startswith("Error in memory profiling. Initial free memory"):
            raise _stale("profile-free-memory-grew", "fail its profiling assert", got)
        raise ValueError(got)
    if kind != "value":
        raise AssertionError(f"profile-kv-budget:upstream: vLLM's worker asserted on a case whose free memory did not "
                             f"grow: {got}")
    if got > 0:
        return got
    # profile-empty-budget-refused-early: vLLM returns it; its fit check is what refuses it.
    from upstream import kv_fit

    outcome = kv_fit.fit_outcome(**_PROBE_LAYER, available_memory=got)
    if outcome["fits"] or not outcome["message"].startswith("No available memory for the cache blocks."):
        raise _stale("profile-empty-budget-refused-early", f"refuse the budget {got} in its fit check", outcome)
    raise ValueError(outcome["message"])


def requested_memory(device: str, total_memory: int, free_memory: int, gpu_memory_utilization: float) -> int:
    """``request_memory`` on a start-up reading: ceil(total * utilization), or vLLM's start-up ValueError."""
    from upstream import memory

    return memory.requested_memory(device, total_memory, free_memory, gpu_memory_utilization)


def util_path_num_blocks(case: Mapping[str, Any]) -> int:
    """vLLM's block count for a profiled UTIL-PATH CASE: ``Worker.determine_available_memory`` with the case's byte
    knob (its start-up refusal first; with the knob 0 the profile's budget, checked as
    :func:`available_kv_cache_memory` checks it), over ``num_layers`` pages of vLLM's ``FullAttentionSpec``; a
    budget below one block leaves vLLM's pool with no block, which its fit check then refuses (ValueError)."""
    import torch
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    from upstream import memory

    if not case.get("profiled", True):
        raise AssertionError("profile-util-blocks:upstream: an unprofiled case (the port's 256-block fallback) has "
                             "no vLLM counterpart; not this gate's")
    kv_bytes = int(case.get("kv_cache_memory_bytes", 0))
    budget = memory.worker_available_memory(case, kv_bytes) if kv_bytes else available_kv_cache_memory(case)
    kv = case["kv"]
    page = FullAttentionSpec(block_size=kv["block_size"], num_kv_heads=kv["num_kv_heads"],
                             head_size=kv["head_size"], dtype=getattr(torch, kv["dtype"])).page_size_bytes
    bytes_per_block = int(page) * int(kv["num_layers"])
    blocks = budget // bytes_per_block
    if blocks < 1:
        raise ValueError(f"a KV budget of {budget} bytes holds no block of {bytes_per_block} bytes")
    return int(blocks)


# ------------------------------------------------------------------------------------------------ util-path deviations

FALLBACK = "util-path-unprofiled-fallback"
INT32_BOUND = "util-path-int32-block-count"
_INT32_MAX = 2**31 - 1
_FALLBACK_BLOCKS = 256
"""The C++ port's default pool when nothing sized it (vllm_model_params, MEM-1.7): the declared figure."""


def planned_num_blocks(kv: Mapping[str, Any], available_memory: int) -> int:
    """``get_kv_cache_config_from_groups(vllm_config, groups, available_memory).num_blocks``
    (vllm/v1/core/kv_cache_planning.py): vLLM's own block count for a budget, one group of ``num_layers``
    FullAttentionSpec layers, the layout resolved as the engine core resolves it."""
    from vllm.v1.core import kv_cache_planning

    from upstream import kv_fit

    specs = kv_fit._layer_specs(kv["num_layers"], kv["block_size"], kv["num_kv_heads"], kv["head_size"], kv["dtype"],
                                None)
    config = kv_fit._config(4096, kv["block_size"], None, specs)
    groups = kv_cache_planning.get_kv_cache_groups(config, dict(specs))
    return int(kv_cache_planning.get_kv_cache_config_from_groups(config, groups, available_memory).num_blocks)


def _bytes_per_block(kv: Mapping[str, Any]) -> int:
    from upstream import kv_fit

    return kv_fit.pool_bytes_per_block(kv["num_layers"], kv["block_size"], kv["num_kv_heads"], kv["head_size"],
                                       kv["dtype"])


def _within_int32(blocks: int, budget: int, kv: Mapping[str, Any]) -> int:
    """``util-path-int32-block-count``: a count above INT32_MAX must be vLLM's planner's unbounded answer; then the
    refusal we declare."""
    if blocks <= _INT32_MAX:
        return blocks
    if blocks != budget // _bytes_per_block(kv):
        raise _stale(INT32_BOUND, f"plan {budget} // {_bytes_per_block(kv)} blocks without a bound", blocks)
    raise ValueError(f"{blocks} KV blocks, more than the {_INT32_MAX} an engine counts (declared: "
                     "vllm_model_params.num_blocks is an int32_t)")


def util_path_as_declared(case: Mapping[str, Any]) -> int:
    """The util-path deviations of spec/deviations.yaml on a UTIL-PATH CASE, each first checked against vLLM 0.33.0:

    - unprofiled (``util-path-unprofiled-fallback``): asserts ``Worker.determine_available_memory`` runs its model
      runner's ``profile_run`` before it returns any budget, with or without kv_cache_memory_bytes (vLLM has no
      path that sizes a pool without one), then the port's declared answer: 256 blocks without the byte knob, else
      vLLM's planner's count for the knob;
    - profiled: :func:`util_path_num_blocks`'s budget, counted by vLLM's planner (:func:`planned_num_blocks`);
    - a count above INT32_MAX (``util-path-int32-block-count``): asserts it is the planner's own unbounded count,
      then the declared refusal (ValueError). A budget below one block is refused, as vLLM's fit check refuses it.
    """
    from upstream import memory

    kv, kv_bytes = case["kv"], int(case.get("kv_cache_memory_bytes", 0))
    if case.get("profiled", True):
        budget = memory.worker_available_memory(case, kv_bytes) if kv_bytes else available_kv_cache_memory(case)
    else:
        try:
            _, runs = memory.worker_run({**case, "gpu_memory_utilization": 0.01}, kv_bytes)
        except (ValueError, AssertionError):
            runs = None  # refused at start-up or by its profiling assert: no budget without the device either
        if runs == 0:
            raise _stale(FALLBACK, "profile the model before it returns a KV budget", "a budget with no profile_run")
        if not kv_bytes:
            return _FALLBACK_BLOCKS
        budget = kv_bytes
    blocks = planned_num_blocks(kv, budget)
    if blocks < 1:
        raise ValueError(f"a KV budget of {budget} bytes holds no block of {_bytes_per_block(kv)} bytes")
    return _within_int32(blocks, budget, kv)
