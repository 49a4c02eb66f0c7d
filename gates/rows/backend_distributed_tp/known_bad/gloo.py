"""Known-bad predictions for the gloo gate (same signature as ``predict_gloo_observations``): a local_rank
counted from 1, and members listed in descending order (self-consistent, but not gloo's group-rank order).
"""
from __future__ import annotations

from impl.distributed.parallel_layout import ParallelDims, RankGroup, rank_group

from ..subjects_gloo import predictor
from .layout import one_based_rank_group, unchecked_group

local_rank_off_by_one = predictor(one_based_rank_group)
"""Predicts ``ranks.index(rank) + 1`` as the rank's place in its gloo group."""


def _descending(dims: ParallelDims, rank: int, kind: str) -> RankGroup:
    members = list(rank_group(dims, rank, kind).ranks)[::-1]
    return unchecked_group(members, members.index(rank))


members_descending = predictor(_descending)
"""Lists each group's members high to low, with local_rank = that list's index of the rank."""
