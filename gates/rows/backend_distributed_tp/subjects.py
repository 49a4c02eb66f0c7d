"""Adapters for the layout gates: ``rank_group`` over every rank of a world, and a validation query.

The every-rank form lets one named case check all ranks of a layout against the oracle.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from impl.distributed.parallel_layout import ParallelDims, RankGroup, rank_group

RankGroupFn = Callable[[ParallelDims, int, str], RankGroup]
EveryRankFn = Callable[[ParallelDims, str], list]


def every_rank(find: RankGroupFn) -> EveryRankFn:
    """A ``(dims, kind)`` function listing ``[members, local_rank]`` of ``find``'s group for each rank in order."""

    def rank_groups(dims: ParallelDims, kind: str) -> list:
        groups = (find(dims, rank, kind) for rank in range(dims.world_size))
        return [[list(group.ranks), group.local_rank] for group in groups]

    return rank_groups


rank_groups = every_rank(rank_group)
"""``[members, local_rank]`` of the impl's ``rank_group`` for every rank of ``dims``."""


def layout_query(dims: Mapping[str, Any], rank: int, kind: str) -> dict[str, Any]:
    """Build ``ParallelDims(**dims)`` and look up ``rank``'s ``kind`` group: the validation table's subject."""
    parallel = ParallelDims(**dims)
    group = rank_group(parallel, rank, kind)
    return {"world_size": parallel.world_size, "ranks": list(group.ranks), "local_rank": group.local_rank}


def parallel_dims_accepts(dims: Mapping[str, Any]) -> bool:
    """``True`` when ``ParallelDims(**dims)`` takes these sizes; its error otherwise (the size-rule subject)."""
    ParallelDims(**dims)
    return True
