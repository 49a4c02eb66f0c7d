"""Thin views of ``upstream.parallel`` in the shape of the TP row's operations (BACKEND-DISTRIBUTED-TP TP-W1).

- ``group_ranks`` / ``rank_groups``: ``upstream.parallel``'s, unchanged (vLLM's own ``initialize_model_parallel``,
  vllm/distributed/parallel_state.py, with torch.distributed faked), for the row's group-ranks and rank-groups
  operations.
- ``shard_plan``: ``upstream.shard_plan``'s, for the row's tp-shard-plan operation (TP-W2: vLLM's own linear and
  vocab-parallel layers, loaded per rank with the TP group faked).
- ``parallel_dims_accepts`` answers the row's ``parallel-dims-accepts`` operation (operations.yaml) with vLLM's own
  verdict: ``vllm.config.ParallelConfig`` (vllm/config/parallel.py) built from the sizes, through
  ``upstream.parallel.parallel_config_outcome``. Only what both sides can say is kept: accepted (``True``) or
  refused, as a ValueError carrying vLLM's message (the error kind invalid-argument of the port's refusal).

``upstream.parallel`` (which imports vLLM) is imported on the first call, not on import: the harness resolves every
gate's targets when it loads the gate file, also where vLLM is not installed and the upstream gates are SKIPPED.
"""
from __future__ import annotations

from typing import Any, Mapping


def group_ranks(dims: Mapping[str, Any], kind: str) -> list[list[int]]:
    """vLLM's ``kind`` groups for ``dims`` (``upstream.parallel.group_ranks``)."""
    from upstream import parallel

    return parallel.group_ranks(dims, kind)


def rank_groups(dims: Mapping[str, Any], kind: str) -> list[list]:
    """[members, index] of every rank's ``kind`` group in vLLM's table (``upstream.parallel.rank_groups``)."""
    from upstream import parallel

    return parallel.rank_groups(dims, kind)


def parallel_dims_accepts(dims: Mapping[str, Any]) -> bool:
    """``True`` when vLLM's ParallelConfig (vllm/config/parallel.py) accepts ``dims``; ValueError with vLLM's text
    when it refuses them (pydantic's ValidationError, itself a ValueError, is reported as its validator's message)."""
    from upstream import parallel

    outcome = parallel.parallel_config_outcome(dims)
    if outcome["accepted"]:
        return True
    raise ValueError(f"vLLM ParallelConfig refused {dict(dims)}: {outcome['message']}")


def shard_plan(geometry: Mapping[str, Any], tp: int) -> dict[str, Any]:
    """vLLM's own shard plan of ``geometry`` at ``tp`` ranks: its layers built per rank with the TP group faked and
    loaded with tagged checkpoint tensors (``upstream.shard_plan.shard_plan``; TP-4.1 to TP-4.8)."""
    from upstream import shard_plan as vllm_layers

    return vllm_layers.shard_plan(geometry, tp)
