"""Oracle for the rank-layout group tables (TP-1.2 to TP-1.8): vLLM's own reshape-and-transpose algorithm.

Follows ``initialize_model_parallel`` in vllm/distributed/parallel_state.py: a torch rank array, one
view per group kind, unbound into rows; a rank's group is the row that holds it.
"""
from __future__ import annotations

import torch

KINDS: tuple[str, ...] = ("tp", "dcp", "pcp", "pp", "dp", "ep")


def _rank_array(tp: int, pcp: int, pp: int, dp: int, external_dp: int, dcp: int) -> torch.Tensor:
    """``arange(world).reshape(-1, dp, pp, pcp, tp)`` after checking the sizes."""
    sizes = {"tp": tp, "pcp": pcp, "pp": pp, "dp": dp, "external_dp": external_dp, "dcp": dcp}
    for name, size in sizes.items():
        if type(size) is not int:
            raise TypeError(f"{name} must be an int, got {size!r}")
        if size < 1:
            raise ValueError(f"{name} must be >= 1, got {size}")
    if pcp == 1:  # vllm/config/parallel.py: DCP reuses the TP ranks when PCP is disabled
        if tp % dcp != 0:
            raise ValueError(f"tp={tp} is not a multiple of dcp={dcp}")
    elif dcp not in (1, pcp, tp * pcp):  # with PCP: DCP disabled, over the PCP axis, or over the whole TP x PCP axis
        raise ValueError(f"with pcp={pcp} > 1, dcp={dcp} is none of 1, pcp={pcp}, tp*pcp={tp * pcp}")
    world = external_dp * dp * pp * pcp * tp
    return torch.arange(world).reshape(-1, dp, pp, pcp, tp)


def vllm_group_ranks(
    kind: str, *, tp: int = 1, pcp: int = 1, pp: int = 1, dp: int = 1, external_dp: int = 1, dcp: int = 1
) -> list[list[int]]:
    """The ``kind`` groups as vLLM creates them: rows of a view of the rank array, in row order."""
    all_ranks = _rank_array(tp, pcp, pp, dp, external_dp, dcp)
    if kind == "tp":
        rows = all_ranks.view(-1, tp)
    elif kind == "dcp":  # "DCP spans PCP first, then TP": the last two axes swapped when dcp > 1
        rows = (all_ranks.transpose(-1, -2) if dcp > 1 else all_ranks).reshape(-1, dcp)
    elif kind == "pcp":
        rows = all_ranks.transpose(3, 4).reshape(-1, pcp)
    elif kind == "pp":
        rows = all_ranks.transpose(2, 4).reshape(-1, pp)
    elif kind == "dp":
        rows = all_ranks.transpose(1, 4).reshape(-1, dp)
    elif kind == "ep":
        rows = all_ranks.transpose(1, 2).reshape(-1, dp * pcp * tp)
    else:
        raise ValueError(f"unknown group kind {kind!r}; known: {KINDS}")
    return [row.tolist() for row in rows.unbind(0)]


def vllm_group_tables(
    *, tp: int = 1, pcp: int = 1, pp: int = 1, dp: int = 1, external_dp: int = 1, dcp: int = 1
) -> dict[str, list[list[int]]]:
    """Every kind's groups, in the order vLLM creates them."""
    sizes = {"tp": tp, "pcp": pcp, "pp": pp, "dp": dp, "external_dp": external_dp, "dcp": dcp}
    return {kind: vllm_group_ranks(kind, **sizes) for kind in KINDS}


def vllm_rank_groups(
    kind: str, *, tp: int = 1, pcp: int = 1, pp: int = 1, dp: int = 1, external_dp: int = 1, dcp: int = 1
) -> list[list]:
    """For every rank in rank order: [its ``kind`` group's members, its index in them] (``ranks.index``)."""
    table = vllm_group_ranks(kind, tp=tp, pcp=pcp, pp=pp, dp=dp, external_dp=external_dp, dcp=dcp)
    world = external_dp * dp * pp * pcp * tp
    found: list[list | None] = [None] * world
    for members in table:
        for index, rank in enumerate(members):  # members are distinct, so index == members.index(rank)
            if found[rank] is not None:
                raise AssertionError(f"rank {rank} is in two {kind} groups: {found[rank][0]} and {members}")
            found[rank] = [members, index]
    missing = [rank for rank, entry in enumerate(found) if entry is None]
    if missing:
        raise AssertionError(f"ranks {missing[:8]} are in no {kind} group")
    return found


def vllm_rank_group_lookups(
    kind: str, rank: int, *, tp: int = 1, pcp: int = 1, pp: int = 1, dp: int = 1, external_dp: int = 1, dcp: int = 1
) -> dict[str, object]:
    """``rank``'s row of vLLM's ``kind`` table read as a Python list: every index, two slices, and ``in`` and
    ``index`` for every rank of the world (TP-1.9)."""
    sizes = {"tp": tp, "pcp": pcp, "pp": pp, "dp": dp, "external_dp": external_dp, "dcp": dcp}
    members = vllm_rank_groups(kind, **sizes)[rank][0]
    world = external_dp * dp * pp * pcp * tp
    return {"members": members, "equals_members": True, "length": len(members), "at": [members[i] for i in range(-len(members), len(members))],
            "refuses_past_ends": True,
            "reversed": members[::-1], "odd": members[1::2], "contains": [r in members for r in range(world)],
            "position": [members.index(r) if r in members else None for r in range(world)]}
