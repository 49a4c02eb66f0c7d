"""Which rank a localized break belongs to, where the gate names the ranks' partials of its reduced taps
(docs/divergence.md, "Per-rank taps"): a break at a rank's partial is that rank's; a break at a reduced tap whose
partials all pass is the reduce's, and where the reduced value is the sum of every partial but one, that rank's
partial is the one the reduce lost. Judged on the teacher-forced run, under the policy each tap is judged by."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from _vllm_gates.definitions.model import Taps
from _vllm_gates.values.policies import Policy
from _vllm_gates.values.tolerance import compare_under


@dataclass(frozen=True)
class RankFinding:
    """The rank a break is attributed to (None: no one rank) and why, in one sentence."""

    rank: int | None
    text: str


def rank_finding(name: str, forced: Mapping[str, Any], taps: Taps, policy: Policy) -> RankFinding | None:
    """The rank the break at tap ``name`` belongs to; None where the gate names no rank suffix or ``name`` is neither
    a rank's partial nor a reduced tap with partials among ``forced`` (the teacher-forced run's taps)."""
    if taps.rank is None:
        return None
    own = taps.partial_of(name)
    if own is not None:
        reduced, rank = own
        return RankFinding(rank, f"rank {rank}'s partial of {reduced}, before the reduce, is wrong")
    names = _partial_names(name, forced, taps)
    if not names:
        return None
    return _attributed(name, forced[name], [forced[partial] for partial in names], names, policy)


def _partial_names(reduced: str, forced: Mapping[str, Any], taps: Taps) -> list[str]:
    """The partials of ``reduced`` the run reports, rank 0 up to the first rank it does not."""
    names: list[str] = []
    while (partial := taps.partial_name(reduced, len(names))) in forced:
        names.append(partial)
    return names


def _attributed(name: str, reduced: Any, partials: list[Any], names: list[str], policy: Policy) -> RankFinding:
    """The reduced value against the float64 sum of the partials, then against that sum without each rank's."""
    import numpy as np

    total = np.sum([partial.astype(np.float64) for partial in partials], axis=0)
    if _fits(policy, name, reduced, total):
        return RankFinding(None, f"{name} is the sum of the ranks' partials ({', '.join(names)}), each within "
                                 f"tolerance: no one rank is at fault")
    for rank, partial in enumerate(partials):
        if len(partials) > 1 and _fits(policy, name, reduced, total - partial.astype(np.float64)):
            kept = ", ".join(other for index, other in enumerate(names) if index != rank)
            return RankFinding(rank, f"rank {rank}'s partial is missing from the reduce: {name} is the sum of the "
                                     f"other ranks' partials ({kept}), each within tolerance")
    return RankFinding(None, f"the reduce is wrong: {name} is neither the sum of the ranks' partials ({', '.join(names)}), "
                             f"each within tolerance, nor that sum without one rank's")


def _fits(policy: Policy, name: str, actual: Any, expected: Any) -> bool:
    """Whether ``actual`` passes ``policy`` against ``expected`` rounded once to its dtype (a comparison that
    cannot be made does not fit)."""
    comparison = compare_under(policy, {name: actual}, {name: expected.astype(actual.dtype)})
    return not comparison.problem and comparison.passed
