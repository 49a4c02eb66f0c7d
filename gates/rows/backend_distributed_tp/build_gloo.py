"""Builders for the gloo gate: ``{layouts: [dims, ...]}`` -> the impl's ParallelDims, and the oracle's plain dims.

The oracle gets only the sizes and derives every group itself (vLLM's torch algorithm, as in upstream
vllm/distributed/parallel_state.py) in a real gloo world; the impl side predicts the report from ``rank_group``.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from vllm_gates import Call

_RANK_AXES = ("external_dp", "dp", "pp", "pcp", "tp")
"""The sizes whose product is the world; dcp splits TP groups and adds no ranks."""


def impl_layouts(data: Mapping[str, Any]) -> Call:
    """``([ParallelDims, ...],)`` for the prediction adapter (the impl imported here: the oracle's worker, which
    imports this module for its builder, never loads it)."""
    from impl.distributed.parallel_layout import ParallelDims

    return Call(args=([ParallelDims(**dims) for dims in data["layouts"]],))


def oracle_layouts(data: Mapping[str, Any]) -> Call:
    """``world_size`` and every layout's sizes as a plain dict; no group table and nothing from impl."""
    layouts = [dict(dims) for dims in data["layouts"]]
    sizes = {math.prod(dims.get(axis, 1) for axis in _RANK_AXES) for dims in layouts}
    if len(sizes) != 1:
        raise ValueError(f"the layouts of one gloo world must share a world size, got {sorted(sizes)}")
    return Call(kwargs={"world_size": sizes.pop(), "layouts": layouts})
