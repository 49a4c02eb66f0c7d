"""The strength audit of a tolerance (issue 29 item 5): each wrong answer, in each output of the result by itself,
must fail at least one case or example under the gate's policy, else the gate is WEAK; and the smallest noise level (a share of the RMS) it rejects, found
by bisection, so that a loose gate shows before it is WEAK.

The expected results come from the gate's cases (`expect:`) and the oracle's outcomes (once per case and generated
example, strength_samples.py); the wrong answers are derived from them (wrong_answers.py), never from the impl.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from _vllm_gates.policies import Policy
from _vllm_gates.wrong_answers import (MEAN, NOISE, PERMUTED, WRONG_ANSWERS, ZEROS, governed, governed_places,
                                      wrong_answer)

DEFAULT_STRENGTH = 0.01  # the noise the audit adds: 1% of the expected RMS, unless the gate declares `strength:`
NOISE_FLOOR, NOISE_CEILING = 1e-12, 1e3  # the bisection's range of noise levels (shares of the RMS)
BISECTION_RATIO = 1.01  # the bisection stops once its bounds are within 1% of each other
BISECTION_STEPS = 40  # and after this many steps on one sample at most

_UNDERIVABLE = {
    ZEROS: "every expected array the tolerance applies to is all zeros",
    MEAN: "every expected array the tolerance applies to is constant",
    PERMUTED: "every expected array the tolerance applies to is constant along its last axis, has one element there "
              "or is 0-d, so no permutation differs",
    NOISE: "every expected array the tolerance applies to is all zeros (RMS 0), or the noise is too small to change "
           "one of its elements in its dtype",
}


@dataclass(frozen=True)
class Sample:
    """One case or generated example: the expected results the gate compares an answer with (the case's `expect:`
    and the oracle's value, the first one the wrong answers are derived from)."""

    label: str  # "case 'name'" or "the generated example {...}"
    kind: str  # "case" or "example"
    references: tuple[Any, ...]


@dataclass(frozen=True)
class AnswerFinding:
    """What the gate did with one wrong answer: the sample that rejected it, or on how many it passed."""

    name: str  # as the report names it: "zeros", "noise of 1% of RMS", ...
    rejected_by: str = ""  # the first sample that rejected it ("": none did)
    derivable: int = 0  # the samples where it differs from the expected result
    passed_cases: int = 0  # of those, the cases and the examples it passed
    passed_examples: int = 0
    underivable: str = ""  # why it differs from no expected result (then it is checked nowhere: never a pass)

    @property
    def weak(self) -> bool:
        return not self.rejected_by and self.derivable > 0


@dataclass(frozen=True)
class StrengthFinding:
    """A numeric gate's tolerance audit: each wrong answer's fate, and the smallest noise level it rejects."""

    policy: str  # the policy as a report names it
    level: float  # the noise level of the noise answer (the gate's `strength:`, else DEFAULT_STRENGTH)
    cases: int  # the cases and generated examples audited
    examples: int
    answers: tuple[AnswerFinding, ...]
    smallest_rejected: float | None  # the smallest noise share of the RMS it rejects (None: none up to NOISE_CEILING)

    @property
    def weak(self) -> tuple[AnswerFinding, ...]:
        return tuple(answer for answer in self.answers if answer.weak)

    @property
    def unchecked(self) -> tuple[AnswerFinding, ...]:
        return tuple(answer for answer in self.answers if answer.underivable)

    @property
    def strong(self) -> bool:
        return not self.weak and not self.unchecked

    def noise_figure(self) -> str:
        """The smallest noise level rejected, as the report shows it."""
        if self.smallest_rejected is None:
            return f"rejects no noise up to {NOISE_CEILING:g}x the RMS"
        below = "<= " if self.smallest_rejected <= NOISE_FLOOR else ""
        return f"rejects noise from {below}{self.smallest_rejected:.3g} of the RMS"

    def problems(self) -> list[str]:
        """Why the gate is WEAK (a wrong answer passed everywhere) or unchecked (one could not be derived)."""
        found = [f"{answer.name} passes {self.policy} on all {_counted(answer.passed_cases, answer.passed_examples)}"
                 for answer in self.weak]
        found += [f"{answer.name} was checked nowhere: {answer.underivable}" for answer in self.unchecked]
        return found

    def summary(self) -> str:
        """One line: WEAK or UNCHECKED with why, else every wrong answer rejected; and the noise figure."""
        if self.weak:
            return "WEAK: " + "; ".join(self.problems()) + f"; {self.noise_figure()}"
        if self.unchecked:
            return "UNCHECKED: " + "; ".join(self.problems()) + f"; {self.noise_figure()}"
        return f"rejects all {len(self.answers)} wrong answers; {self.noise_figure()}"

    def to_data(self) -> dict[str, Any]:
        """The finding as plain data (it travels between xdist processes and into JSON reports)."""
        return asdict(self)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> "StrengthFinding":
        """The finding ``to_data`` wrote (a JSON report's item record); ValueError/TypeError/KeyError if malformed."""
        answers = tuple(AnswerFinding(**answer) for answer in data["answers"])
        smallest = data["smallest_rejected"]
        return cls(str(data["policy"]), float(data["level"]), int(data["cases"]), int(data["examples"]), answers,
                   None if smallest is None else float(smallest))


def _counted(cases: int, examples: int) -> str:
    parts = ([f"{cases} case{'s' if cases != 1 else ''}"] if cases else []) + \
            ([f"{examples} example{'s' if examples != 1 else ''}"] if examples else [])
    return " and ".join(parts)


def noise_name(level: float) -> str:
    """The noise answer as a report names it: "noise of 1% of RMS"."""
    return f"noise of {level * 100:g}% of RMS"


def usable(policy: Policy, samples: Sequence[Sample]) -> list[Sample]:
    """The samples whose expected result holds an array the policy applies a tolerance to, with elements."""
    return [s for s in samples if any(array.size for array in governed(s.references[0], policy))]


def passes(policy: Policy, answer: Any, sample: Sample) -> bool:
    """Whether the gate lets ``answer`` through on ``sample``: it agrees with every expected result there (a
    comparison that cannot be judged is the gate's ERROR, not a pass)."""
    from _vllm_gates.tolerance import compare_under

    for reference in sample.references:
        comparison = compare_under(policy, answer, reference, describe=False)
        if comparison.problem or not comparison.passed:
            return False
    return True


def audit_tolerance(policy: Policy, samples: Sequence[Sample], level: float) -> StrengthFinding:
    """Every wrong answer tried in every governed place of the results (one output wrong, the others right) on every
    sample, stopping at the first sample that rejects it there; and the bisection."""
    places = list(dict.fromkeys(place for sample in samples
                                for place, _ in governed_places(sample.references[0], policy)))
    answers: list[AnswerFinding] = []
    for name in WRONG_ANSWERS:
        shown = noise_name(level) if name == NOISE else name
        tried = [_try_in(name, shown, place, policy, samples, level) for place in places]
        weak = [finding for finding in tried if finding.weak]
        checked = [finding for finding in tried if finding.derivable]
        if weak:
            answers += weak
        elif checked:
            answers.append(AnswerFinding(shown, checked[0].rejected_by, sum(f.derivable for f in checked)))
        else:
            answers.append(AnswerFinding(shown, underivable=_UNDERIVABLE[name]))
    cases = sum(s.kind == "case" for s in samples)
    return StrengthFinding(policy.describe(), level, cases, len(samples) - cases, tuple(answers),
                           smallest_rejected(policy, samples))


def _try_in(name: str, shown: str, place: str, policy: Policy, samples: Sequence[Sample],
            level: float) -> AnswerFinding:
    """The wrong answer ``name`` in the array at ``place`` only, on each sample holding one there."""
    derivable = passed_cases = passed_examples = 0
    for number, sample in enumerate(samples):
        wrong = wrong_answer(name, sample.references[0], policy, number, level, place)
        if wrong is None:
            continue
        derivable += 1
        if not passes(policy, wrong, sample):
            return AnswerFinding(shown, sample.label, derivable)
        passed_cases += sample.kind == "case"
        passed_examples += sample.kind == "example"
    return AnswerFinding(f"{shown} in the result{place}" if place else shown, "", derivable, passed_cases,
                         passed_examples)


def rejects(policy: Policy, sample: Sample, number: int, level: float) -> bool:
    """Whether the gate rejects the sample's expected result plus noise of ``level`` × its RMS (noise too small to
    change an element is no wrong answer: not rejected)."""
    wrong = wrong_answer(NOISE, sample.references[0], policy, number, level)
    return wrong is not None and not passes(policy, wrong, sample)


def smallest_rejected(policy: Policy, samples: Sequence[Sample]) -> float | None:
    """The smallest noise level (share of the RMS, within BISECTION_RATIO) that some sample rejects, by bisection
    in log space on each sample that rejects noise just under the best level found so far (each sample's noise is
    seeded, so that whether it is rejected grows with the level); None if no sample rejects NOISE_CEILING."""
    best: float | None = None
    for number, sample in enumerate(samples):
        high = NOISE_CEILING if best is None else best / BISECTION_RATIO
        if high < NOISE_FLOOR or not rejects(policy, sample, number, high):
            continue
        if rejects(policy, sample, number, NOISE_FLOOR):
            return NOISE_FLOOR
        low = NOISE_FLOOR
        for _ in range(BISECTION_STEPS):
            if high / low <= BISECTION_RATIO:
                break
            middle = math.sqrt(low * high)
            if rejects(policy, sample, number, middle):
                high = middle
            else:
                low = middle
        best = high
    return best
