"""Whether two results agree, with what a policy found (docs/numeric-gates.md §3-4): the report lines of a failing
comparison and the share of its tolerance a passing one used."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from _vllm_gates.base.errors import GatesError

if TYPE_CHECKING:
    from _vllm_gates.values.policies import Policy
    from _vllm_gates.values.tolerance import Comparison


class NothingCompared(GatesError):
    """A policy's comparison that cannot be judged (no array element compared, broken oracle margins): ERROR."""


@dataclass(frozen=True)
class Agreement:
    """The answer to "do these results agree?", truthy when they do; ``comparison``: a policy's findings."""

    agree: bool
    comparison: Comparison | None = None

    def __bool__(self) -> bool:
        return self.agree

    def lines(self) -> list[tuple[str, str]]:
        """How far off the results are (nothing where they agree or no policy compared them)."""
        if self.agree or self.comparison is None:
            return []
        from _vllm_gates.values.tolerance_report import how_far_off

        return how_far_off(self.comparison)


AGREE, DISAGREE = Agreement(True), Agreement(False)


def under_policy(policy: Policy, actual: Any, expected: Any) -> Agreement:
    """The results compared under ``policy``; NothingCompared where nothing could be judged."""
    from _vllm_gates.values.tolerance import compare_under

    comparison = compare_under(policy, actual, expected)
    if comparison.problem:
        raise NothingCompared(comparison.problem)
    return Agreement(comparison.passed, comparison)


class ToleranceUsage:
    """The most of its tolerance any passing comparison of one item used, where (``at``: the case or example, the
    output's path in the result and its dtype), and the token positions it excused (docs/numeric-gates.md §4; docs/evidence.md);
    ``used`` stays None where no policy compared anything."""

    __slots__ = ("used", "at", "excused")

    def __init__(self) -> None:
        self.used: float | None = None
        self.at: dict[str, str] | None = None
        self.excused = 0

    def note(self, agreement: Agreement, where: str | Callable[[], str] = "") -> None:
        """A comparison's share used, on ``where`` ("case 'name'", or a callable giving "the generated example ...",
        rendered only where that comparison is the item's most)."""
        comparison = agreement.comparison
        if agreement.agree and comparison is not None:
            if self.used is None or comparison.used > self.used or (self.at is None and comparison.arrays):
                most = max(comparison.arrays, key=lambda found: found.used, default=None)
                if most is not None:
                    self.at = {"where": where() if callable(where) else where, "output": most.path, "dtype": most.dtype}
            self.used = max(self.used or 0.0, comparison.used)
            self.excused += comparison.excused

