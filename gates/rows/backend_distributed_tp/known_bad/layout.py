"""Known-bad rank layouts: TP outermost, sorted groups, DCP chunks across TP groups, DCP as consecutive chunks when
PCP is on (no transpose), EP across pipeline stages, a local_rank off by one, a ParallelDims that lets bad sizes or
ranks through, and size rules that ignore PCP.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from impl.distributed.parallel_layout import ParallelDims, RankGroup, group_ranks, rank_group

from ..subjects import every_rank, layout_query

# --- group tables: same signature as group_ranks(dims, kind) ---------------------------------------------


def tp_outermost(dims: ParallelDims, kind: str) -> list[list[int]]:
    """Lays ranks out as (tp, external_dp, dp, pp, pcp): TP groups become strided instead of consecutive."""
    others = dims.world_size // dims.tp

    def relabel(rank: int) -> int:
        return rank % dims.tp * others + rank // dims.tp  # the rank's tp coordinate moved outermost

    return [[relabel(rank) for rank in group] for group in group_ranks(dims, kind)]


def groups_sorted(dims: ParallelDims, kind: str) -> list[list[int]]:
    """Sorts the groups, losing vLLM's creation order (DP groups come out [0,4] [1,5] ... not [0,4] [2,6] ...)."""
    return sorted(group_ranks(dims, kind))


def dcp_chunks_cross_tp(dims: ParallelDims, kind: str) -> list[list[int]]:
    """Builds DCP groups with a world-wide stride, so a DCP group spans several TP groups."""
    if kind != "dcp":
        return group_ranks(dims, kind)
    stride = dims.world_size // dims.dcp
    return [list(range(first, dims.world_size, stride)) for first in range(stride)]


def dcp_ignores_pcp(dims: ParallelDims, kind: str) -> list[list[int]]:
    """Forgets DCP's transpose(-1, -2): DCP groups are consecutive chunks even when PCP is on (tp=2, pcp=2, dcp=2
    gives [0,1] [2,3], not vLLM's [0,2] [1,3])."""
    if kind != "dcp":
        return group_ranks(dims, kind)
    return [list(range(first, first + dims.dcp)) for first in range(0, dims.world_size, dims.dcp)]


def ep_spans_pipeline_stages(dims: ParallelDims, kind: str) -> list[list[int]]:
    """Forgets EP's transpose(1, 2): each EP group takes consecutive ranks, mixing pipeline stages."""
    if kind != "ep":
        return group_ranks(dims, kind)
    size = dims.dp * dims.pcp * dims.tp
    return [list(range(first, first + size)) for first in range(0, dims.world_size, size)]


# --- every-rank groups: same signature as gates.rows.backend_distributed_tp.subjects:rank_groups(dims, kind) ---------------


def unchecked_group(ranks: Sequence[int], local_rank: int) -> RankGroup:
    """A RankGroup of any members and local_rank, as a buggy port would hand out."""
    return RankGroup(ranks=ranks, local_rank=local_rank)  # type: ignore[arg-type]


def one_based_rank_group(dims: ParallelDims, rank: int, kind: str) -> RankGroup:
    """rank_group with local_rank counted from 1."""
    group = rank_group(dims, rank, kind)
    return unchecked_group(group.ranks, group.local_rank + 1)


local_rank_off_by_one = every_rank(one_based_rank_group)
"""Counts local_rank from 1 (``ranks.index(rank) + 1``)."""


def _from_table(table_fn: Callable[[ParallelDims, str], list[list[int]]]) -> Callable[[ParallelDims, str], list]:
    """Every-rank groups looked up in a (bad) table."""

    def rank_groups(dims: ParallelDims, kind: str) -> list:
        owner = {rank: group for group in table_fn(dims, kind) for rank in group}
        return [[owner[rank], owner[rank].index(rank)] for rank in range(dims.world_size)]

    return rank_groups


rank_groups_tp_outermost = _from_table(tp_outermost)
"""rank_group over the TP-outermost layout."""

rank_groups_ep_spans_stages = _from_table(ep_spans_pipeline_stages)
"""rank_group whose EP group mixes pipeline stages."""

rank_groups_dcp_ignores_pcp = _from_table(dcp_ignores_pcp)
"""rank_group whose DCP group is a consecutive chunk when PCP is on."""


# --- validation: same signature as gates.rows.backend_distributed_tp.subjects:layout_query(dims, rank, kind) --------------


def bools_accepted(dims: Mapping[str, Any], rank: int, kind: str) -> dict[str, Any]:
    """Takes True as 1 and False as 0 for sizes and the rank."""
    fixed = {name: int(value) if isinstance(value, bool) else value for name, value in dims.items()}
    return layout_query(fixed, int(rank) if isinstance(rank, bool) else rank, kind)


def dcp_divisibility_unchecked(dims: Mapping[str, Any], rank: int, kind: str) -> dict[str, Any]:
    """Accepts a dcp that does not divide tp (answers as if dcp were 1)."""
    tp, dcp = dims.get("tp", 1), dims.get("dcp", 1)
    if isinstance(tp, int) and isinstance(dcp, int) and dcp >= 1 and tp % dcp:
        return layout_query({**dims, "dcp": 1}, rank, kind)
    return layout_query(dims, rank, kind)


def rank_wraps_around(dims: Mapping[str, Any], rank: int, kind: str) -> dict[str, Any]:
    """Reduces an out-of-world rank modulo the world size instead of refusing it."""
    world = ParallelDims(**dims).world_size
    return layout_query(dims, rank % world if isinstance(rank, int) and not isinstance(rank, bool) else rank, kind)


def vllm_message_missing_space(dims: Mapping[str, Any], rank: int, kind: str) -> dict[str, Any]:
    """Keeps vLLM's message typo ``divisible bydcp_size``."""
    tp, dcp = dims.get("tp", 1), dims.get("dcp", 1)
    if isinstance(tp, int) and isinstance(dcp, int) and dcp >= 1 and tp % dcp:
        raise ValueError(f"tp_size={tp} must be divisible by" f"dcp_size={dcp}.")
    return layout_query(dims, rank, kind)


# --- size rule: same signature as gates.rows.backend_distributed_tp.subjects:parallel_dims_accepts(dims) ---------------


def _sizes(dims: Mapping[str, Any]) -> tuple[int, int, int]:
    return dims.get("tp", 1), dims.get("pcp", 1), dims.get("dcp", 1)


def dcp_rule_ignores_pcp(dims: Mapping[str, Any]) -> bool:
    """The old rule: dcp must divide tp whatever pcp is (refuses tp=1, pcp=2, dcp=2; takes tp=2, pcp=3, dcp=2)."""
    tp, _, dcp = _sizes(dims)
    ParallelDims(**{**dims, "pcp": 1})
    if tp % dcp:
        raise ValueError(f"tp_size={tp} must be divisible by dcp_size={dcp}")
    return True


def dcp_divides_tp_times_pcp(dims: Mapping[str, Any]) -> bool:
    """Takes any dcp dividing tp*pcp (tp=4, pcp=2, dcp=2 or 4 accepted; vLLM takes 1, 2 and 8 only)."""
    tp, pcp, dcp = _sizes(dims)
    if pcp > 1 and (tp * pcp) % dcp == 0:
        return True
    ParallelDims(**dims)
    return True


def dcp_unchecked(dims: Mapping[str, Any]) -> bool:
    """Accepts every dcp >= 1."""
    ParallelDims(**{**dims, "dcp": 1})
    return True


def layout_query_dcp_rule_ignores_pcp(dims: Mapping[str, Any], rank: int, kind: str) -> dict[str, Any]:
    """layout_query behind the old size rule (dcp must divide tp whatever pcp is)."""
    if all(isinstance(dims.get(name, 1), int) for name in ("tp", "pcp", "dcp")) and dims.get("dcp", 1) >= 1:
        dcp_rule_ignores_pcp(dims)
    return layout_query(dims, rank, kind)
