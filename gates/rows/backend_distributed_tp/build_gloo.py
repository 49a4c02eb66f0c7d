"""Builders for the gloo gate: ``{layouts: [dims, ...]}`` -> the impl's layouts, and the oracle's plain tables.

The oracle gets the impl's group tables as plain lists, creates those groups in a real gloo world and
reports what each rank observed; the impl side predicts the same from ``rank_group``.
"""
from __future__ import annotations

from typing import Any, Mapping

from vllm_gates import Call
from impl.distributed.parallel_layout import GROUP_KINDS, ParallelDims, group_ranks


def impl_layouts(data: Mapping[str, Any]) -> Call:
    """``([ParallelDims, ...],)`` for the prediction adapter."""
    return Call(args=([ParallelDims(**dims) for dims in data["layouts"]],))


def oracle_tables(data: Mapping[str, Any]) -> Call:
    """``world_size`` and, per layout, every kind's group table in creation order, as plain lists."""
    layouts = [ParallelDims(**dims) for dims in data["layouts"]]
    sizes = {dims.world_size for dims in layouts}
    if len(sizes) != 1:
        raise ValueError(f"the layouts of one gloo world must share a world size, got {sorted(sizes)}")
    tables = [{kind: group_ranks(dims, kind) for kind in GROUP_KINDS} for dims in layouts]
    return Call(kwargs={"world_size": sizes.pop(), "layouts": tables})
