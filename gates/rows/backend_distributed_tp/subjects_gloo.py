"""Adapter for the gloo gate: what each rank of a real world should observe, predicted from ``rank_group``."""
from __future__ import annotations

from typing import Callable

from impl.distributed.parallel_layout import GROUP_KINDS, ParallelDims, RankGroup, rank_group

Prediction = list[list[dict[str, list]]]


def predictor(find: Callable[[ParallelDims, int, str], RankGroup]) -> Callable[[list[ParallelDims]], Prediction]:
    """A function giving, per layout and rank, ``{kind: [members, rank in group, all-reduce sum of rank ids]}``."""

    def predict(layouts: list[ParallelDims]) -> Prediction:
        out = []
        for dims in layouts:
            per_rank = []
            for rank in range(dims.world_size):
                groups = {kind: find(dims, rank, kind) for kind in GROUP_KINDS}
                per_rank.append({kind: [list(g.ranks), g.local_rank, sum(g.ranks)] for kind, g in groups.items()})
            out.append(per_rank)
        return out

    return predict


predict_gloo_observations = predictor(rank_group)
"""The impl's prediction of the gloo oracle's report."""
