"""The rank-group-lookups operation's helpers (TP-1.9): the impl's view of a group's members as a sequence, the
builders and the strategy.

``rank_group`` hands out its members as a ``StridedRanks`` computed from strides; this view asks it for every
index, two slices, and membership and position of every rank of the world, so each of those paths is judged.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from hypothesis import strategies as st

from vllm_gates import Call

from .strategies import KINDS, valid_dcp

if TYPE_CHECKING:
    from impl.distributed.parallel_layout import ParallelDims

# The judge imports this module for its strategy: the impl is imported only inside the worker-side functions.


def rank_group_lookups(dims: ParallelDims, rank: int, kind: str) -> dict[str, Any]:
    """The impl's group of ``rank`` read through its sequence API: items, slices, ``in`` and ``index``."""
    from impl.distributed.parallel_layout import rank_group

    ranks = rank_group(dims, rank, kind).ranks
    size = len(ranks)

    def position(member: int) -> int | None:
        try:
            return ranks.index(member)
        except ValueError:
            return None

    def refused(index: int) -> bool:
        try:
            ranks[index]
        except IndexError:
            return True
        return False

    world = range(dims.world_size)
    return {"members": list(ranks), "equals_members": ranks == list(ranks), "length": size, "at": [ranks[i] for i in range(-size, size)],
            "refuses_past_ends": refused(size) and refused(-size - 1),
            "reversed": ranks[::-1], "odd": ranks[1::2], "contains": [r in ranks for r in world],
            "position": [position(r) for r in world]}


def impl_call(data: Mapping[str, Any]) -> Call:
    """``(ParallelDims(**dims), rank, kind)`` for the impl's view."""
    from impl.distributed.parallel_layout import ParallelDims

    return Call(args=(ParallelDims(**data["dims"]), data["rank"], data["kind"]))


def oracle_call(data: Mapping[str, Any]) -> Call:
    """``(kind, rank, **dims)`` for the torch-table oracle."""
    return Call(args=(data["kind"], data["rank"]), kwargs=dict(data["dims"]))


@st.composite
def _layout_and_rank(draw: Any) -> dict[str, Any]:
    """A layout of at most 64 ranks (the output lists every rank, so a failing example stays small to shrink and
    show), a kind and one rank of its world."""
    dims = {name: draw(st.integers(1, cap)) for name, cap in (("tp", 4), ("pcp", 2), ("pp", 2), ("dp", 2), ("external_dp", 2))}
    dims["dcp"] = draw(st.sampled_from(valid_dcp(dims["tp"], dims["pcp"])))
    world = dims["tp"] * dims["pcp"] * dims["pp"] * dims["dp"] * dims["external_dp"]
    return {"dims": dims, "kind": draw(st.sampled_from(KINDS)), "rank": draw(st.integers(0, world - 1))}


def strategy() -> st.SearchStrategy[dict[str, Any]]:
    """Plain case inputs ``{dims, rank, kind}``."""
    return _layout_and_rank()


def negative_index_from_the_front(dims: ParallelDims, rank: int, kind: str) -> dict[str, Any]:
    """Known-bad: ``ranks[-i]`` read as ``ranks[i - 1]`` (a negative index counted from the front)."""
    found = rank_group_lookups(dims, rank, kind)
    members = found["members"]
    return {**found, "at": [members[i if i >= 0 else -i - 1] for i in range(-len(members), len(members))]}


def position_counts_from_one(dims: ParallelDims, rank: int, kind: str) -> dict[str, Any]:
    """Known-bad: ``ranks.index(r)`` one past the member's place."""
    found = rank_group_lookups(dims, rank, kind)
    return {**found, "position": [p if p is None else p + 1 for p in found["position"]]}
