"""Builders for the BACKEND-DISTRIBUTED-TP layout gates: case data ``{dims: {...}, kind}`` -> impl and oracle calls.

``dims`` holds ParallelDims fields (tp, pcp, pp, dp, external_dp, dcp; absent ones are 1); the impl gets a
``ParallelDims``, the oracle the same sizes as plain keyword ints.
"""
from __future__ import annotations

from typing import Any, Mapping

from vllm_gates import Call


def impl_dims_kind(data: Mapping[str, Any]) -> Call:
    """``(ParallelDims(**dims), kind)`` for group_ranks and the every-rank adapter. The impl is imported here, not
    by the module, so the oracle's worker, which imports this module for its builder, never loads it."""
    from impl.distributed.parallel_layout import ParallelDims

    return Call(args=(ParallelDims(**data["dims"]), data["kind"]))


def oracle_dims_kind(data: Mapping[str, Any]) -> Call:
    """``(kind, **dims)`` for the torch oracle."""
    return Call(args=(data["kind"],), kwargs=dict(data["dims"]))
