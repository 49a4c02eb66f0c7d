"""The strength audit of a tolerance (docs/gate-files.md, "The strength audit of a tolerance"):
each wrong answer, in each output of the result by itself and in each dtype of it, must fail at least one case or
example under the gate's policy, else the gate is WEAK; and per dtype the smallest relative noise and the smallest
RMS-scaled (absolute) noise it rejects, found by bisection, so that a loose rtol or atol shows before it is WEAK.

The expected results come from the gate's cases (`expect:`) and the oracle's outcomes (once per case and generated
example, strength_samples.py); the wrong answers are derived from them (wrong_answers.py), never from the impl.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from _vllm_gates.base.errors import DefinitionError, Location, Problem
from _vllm_gates.values.policies import ALLCLOSE_DEFAULTS, PerDtype, Policy, per_dtype_mappings
from _vllm_gates.values.wrong_answers import MEAN, NOISE, PERMUTED, RELATIVE, WRONG_ANSWERS, ZEROS, governed, governed_places, wrong_answer

DEFAULT_STRENGTH = 0.01  # the noise the audit adds: 1% of the expected RMS, unless the gate declares `strength:`
# The relative noise every gate must reject in arrays of a dtype: RELATIVE_FACTOR x the dtype's default rtol, and at
# least the gate's strength (1%). The factor keeps a gate at the defaults strong (4x the default rtol is over it
# by far more than the dtype's rounding, 2^-9 of bfloat16's 1.6e-2); the strength floor keeps float32's rows whose
# argued tolerances are ~1e-3 relative (RoPE's table and rotation, from float32 angles) strong while still refusing
# a float16 rtol over 1e-2 (10x its default) and a bfloat16 one over 6.4e-2.
RELATIVE_FACTOR = 4.0
NOISE_FLOOR, NOISE_CEILING = 1e-12, 1e3  # the bisection's range of noise levels (shares of the RMS or of each element)
UNIT_CEILING = 1 << 51  # ulp: the bisection's most units in the last place
BISECTION_RATIO = 1.01  # the bisection stops once its bounds are within 1% of each other
BISECTION_STEPS = 60  # and after this many steps on one sample at most
SPACING = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}  # at 1.0

_UNDERIVABLE = {
    ZEROS: "every expected array the tolerance applies to is all zeros",
    MEAN: "every expected array the tolerance applies to is constant",
    PERMUTED: "every expected array the tolerance applies to is constant along its last axis, has one element there "
              "or is 0-d, so no permutation differs",
    NOISE: "every expected array the tolerance applies to is all zeros (RMS 0), or the noise is too small to change "
           "one of its elements in its dtype",
    RELATIVE: "every expected array the tolerance applies to is all zeros, or the noise is too small to change one of "
              "its elements in its dtype",
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
    dtype: str = ""  # the dtype of the arrays it was made in ("": the gate's only dtype there)
    tolerance: str = ""  # the policy as it applies to that dtype, as a report names it ("": the finding's policy)

    @property
    def weak(self) -> bool:
        return not self.rejected_by and self.derivable > 0


@dataclass(frozen=True)
class DtypeFigures:
    """The smallest noise the gate rejects in the arrays of one dtype (None: none up to the bisection's ceiling)."""

    dtype: str
    required: float  # the relative noise it must reject there (relative_level)
    relative: float | None  # relative noise: the share of each element (ulp: units in the last place)
    absolute: float | None  # RMS-scaled noise: the share of the RMS


@dataclass(frozen=True)
class StrengthFinding:
    """A numeric gate's tolerance audit: each wrong answer's fate, per dtype the smallest noise it rejects, and notes
    on what its expected results cannot test."""

    policy: str  # the policy as a report names it
    level: float  # the noise level of the noise answer (the gate's `strength:`, else DEFAULT_STRENGTH)
    cases: int  # the cases and generated examples audited
    examples: int
    answers: tuple[AnswerFinding, ...]
    figures: tuple[DtypeFigures, ...] = ()  # per float dtype of the governed arrays
    notes: tuple[str, ...] = ()  # what the audit could not test (never a failure)
    unit: str = "share"  # how relative noise is measured: "share" of each element, "relative L2" (nmse), "units" (ulp)

    @property
    def smallest_rejected(self) -> float | None:
        """The smallest RMS-scaled noise some dtype's arrays reject (None: none up to NOISE_CEILING)."""
        found = [figure.absolute for figure in self.figures if figure.absolute is not None]
        return min(found) if found else None

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
        """The smallest relative and absolute noise rejected, per dtype, as the report shows them."""
        if not self.figures:
            return f"rejects no noise up to {NOISE_CEILING:g}x the RMS"
        return "; ".join(f"{figure.dtype}: {self._relative(figure)}, {_absolute(figure.absolute)}"
                         for figure in self.figures)

    def _relative(self, figure: DtypeFigures) -> str:
        if figure.relative is None:
            ceiling = f"{UNIT_CEILING} units" if self.unit == "units" else f"{NOISE_CEILING:g}x each element"
            return f"rejects no relative noise up to {ceiling}"
        if self.unit == "units":
            return f"rejects relative noise from {figure.relative:.0f} units in the last place"
        below = "<= " if figure.relative <= NOISE_FLOOR else ""
        return f"rejects relative noise from {below}{figure.relative:.3g}" + (" (relative L2)" if self.unit == "relative L2" else "")

    def problems(self) -> list[str]:
        """Why the gate is WEAK (a wrong answer passed everywhere) or unchecked (one could not be derived)."""
        found = [f"{answer.name} passes {answer.tolerance or self.policy} on all "
                 f"{_counted(answer.passed_cases, answer.passed_examples)}" for answer in self.weak]
        found += [f"{answer.name} was checked nowhere: {answer.underivable}" for answer in self.unchecked]
        return found

    def summary(self) -> str:
        """One line: WEAK or UNCHECKED with why, else every wrong answer rejected; the noise figures; the notes."""
        notes = "".join(f"; note: {note}" for note in self.notes)
        if self.weak:
            return "WEAK: " + "; ".join(self.problems()) + f"; {self.noise_figure()}{notes}"
        if self.unchecked:
            return "UNCHECKED: " + "; ".join(self.problems()) + f"; {self.noise_figure()}{notes}"
        return f"rejects all {len(self.answers)} wrong answers; {self.noise_figure()}{notes}"

    def to_data(self) -> dict[str, Any]:
        """The finding as plain data (it travels between xdist processes and into JSON reports)."""
        return asdict(self)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> StrengthFinding:
        """The finding ``to_data`` wrote (a JSON report's item record); ValueError/TypeError/KeyError if malformed."""
        answers = tuple(AnswerFinding(**answer) for answer in data["answers"])
        figures = tuple(DtypeFigures(str(f["dtype"]), float(f["required"]), _optional(f["relative"]),
                                     _optional(f["absolute"])) for f in data["figures"])
        return cls(str(data["policy"]), float(data["level"]), int(data["cases"]), int(data["examples"]), answers,
                   figures, tuple(str(note) for note in data["notes"]), str(data["unit"]))


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)


def _absolute(level: float | None) -> str:
    if level is None:
        return f"no noise up to {NOISE_CEILING:g}x the RMS"
    return f"noise from {'<= ' if level <= NOISE_FLOOR else ''}{level:.3g} of the RMS"


def _counted(cases: int, examples: int) -> str:
    parts = ([f"{cases} case{'s' if cases != 1 else ''}"] if cases else []) + \
            ([f"{examples} example{'s' if examples != 1 else ''}"] if examples else [])
    return " and ".join(parts)


def noise_name(level: float) -> str:
    """The noise answer as a report names it: "noise of 1% of RMS"."""
    return f"noise of {level * 100:g}% of RMS"


def relative_level(policy: Policy, dtype: str, level: float) -> float:
    """The relative noise a gate must reject in arrays of ``dtype``: RELATIVE_FACTOR x the dtype's default rtol, at
    least ``level`` (the gate's strength); under `ulp` in units in the last place (the share over the dtype's
    spacing at 1.0, rounded up)."""
    share = max(level, RELATIVE_FACTOR * ALLCLOSE_DEFAULTS[dtype][0])
    return float(math.ceil(share / SPACING[dtype])) if policy.name == "ulp" else share


def relative_name(policy: Policy, dtype: str, level: float) -> str:
    """The relative noise answer as a report names it: "relative noise of 1% in float16"."""
    if policy.name == "ulp":
        return f"relative noise of {level:.0f} units in the last place in {dtype}"
    return f"relative noise of {level * 100:.3g}% in {dtype}"


def usable(policy: Policy, samples: Sequence[Sample]) -> list[Sample]:
    """The samples whose expected result holds an array the policy applies a tolerance to, with elements."""
    return [s for s in samples if any(array.size for array in governed(s.references[0], policy))]


def passes(policy: Policy, answer: Any, sample: Sample) -> bool:
    """Whether the gate lets ``answer`` through on ``sample``: it agrees with every expected result there (a
    comparison that cannot be judged is the gate's ERROR, not a pass)."""
    from _vllm_gates.values.tolerance import compare_under

    for reference in sample.references:
        comparison = compare_under(policy, answer, reference, describe=False)
        if comparison.problem or not comparison.passed:
            return False
    return True


def _groups(policy: Policy, samples: Sequence[Sample]) -> list[tuple[str, str]]:
    """Each (place, dtype) of a governed array with elements in some sample, in the order they are met."""
    return list(dict.fromkeys((place, array.dtype.name) for sample in samples
                              for place, array in governed_places(sample.references[0], policy) if array.size))


def float_dtypes(policy: Policy, samples: Sequence[Sample]) -> list[str]:
    """The float dtypes of the governed arrays of the samples, in the order they are met."""
    return list(dict.fromkeys(dtype for _, dtype in _groups(policy, samples) if dtype in ALLCLOSE_DEFAULTS))


def audit_tolerance(policy: Policy, samples: Sequence[Sample], level: float) -> StrengthFinding:
    """Every wrong answer tried in every governed place and dtype of the results (one output wrong, the others
    right) on every sample, stopping at the first sample that rejects it there; and per dtype the bisections.
    DefinitionError where the policy names a tolerance per dtype for a dtype no output has, or lacks a bound for
    one the outputs have."""
    check_declared_dtypes(policy, samples)
    groups = _groups(policy, samples)
    several = {place for place, _ in groups if sum(p == place for p, _ in groups) > 1}  # places of several dtypes
    uniform = not per_dtype_mappings(policy) and (policy.name in ("nmse", "ulp") or policy.rtol is not None)
    answers: list[AnswerFinding] = []
    for name in WRONG_ANSWERS:
        tried: list[AnswerFinding] = []
        names: list[str] = []
        for place, dtype in groups:
            if name == RELATIVE and dtype not in ALLCLOSE_DEFAULTS:
                continue  # relative noise is a float answer (token ids get the others)
            answer_level = relative_level(policy, dtype, level) if name == RELATIVE else level
            shown = (relative_name(policy, dtype, answer_level) if name == RELATIVE else
                     noise_name(level) if name == NOISE else name) + \
                (f" in {dtype}" if name != RELATIVE and place in several else "")
            tolerance = "" if uniform or dtype not in ALLCLOSE_DEFAULTS else policy.describe_for(dtype)
            names.append(shown)
            tried.append(_try_in(name, shown, place, dtype, policy, samples, answer_level, tolerance))
        weak = [finding for finding in tried if finding.weak]
        checked = [finding for finding in tried if finding.derivable]
        if weak:
            answers += weak
        elif checked:
            answers.append(AnswerFinding(names[0] if len(set(names)) == 1 else _generic(name, level),
                                         checked[0].rejected_by, sum(f.derivable for f in checked)))
        elif tried or name != RELATIVE:
            answers.append(AnswerFinding(names[0] if len(set(names)) == 1 else _generic(name, level),
                                         underivable=_UNDERIVABLE[name]))
    cases = sum(s.kind == "case" for s in samples)
    dtypes = float_dtypes(policy, samples)
    figures = tuple(DtypeFigures(dtype, relative_level(policy, dtype, level),
                                 smallest_rejected(policy, samples, RELATIVE, dtype),
                                 smallest_rejected(policy, samples, NOISE, dtype)) for dtype in dtypes)
    unit = {"ulp": "units", "nmse": "relative L2"}.get(policy.name, "share")
    return StrengthFinding(policy.describe(), level, cases, len(samples) - cases, tuple(answers), figures,
                           nan_notes(policy, samples), unit)


def _generic(name: str, level: float) -> str:
    """A wrong answer's name where it was made at several levels (relative noise, per dtype)."""
    return noise_name(level) if name == NOISE else "relative noise at each dtype's level" if name == RELATIVE else name


def _try_in(name: str, shown: str, place: str, dtype: str, policy: Policy, samples: Sequence[Sample],
            level: float, tolerance: str) -> AnswerFinding:
    """The wrong answer ``name`` in the array of ``dtype`` at ``place`` only, on each sample holding one there."""
    derivable = passed_cases = passed_examples = 0
    for number, sample in enumerate(samples):
        wrong = wrong_answer(name, sample.references[0], policy, number, level, place, dtype)
        if wrong is None:
            continue
        derivable += 1
        if not passes(policy, wrong, sample):
            return AnswerFinding(shown, sample.label, derivable)
        passed_cases += sample.kind == "case"
        passed_examples += sample.kind == "example"
    return AnswerFinding(f"{shown} in the result{place}" if place else shown, "", derivable, passed_cases,
                         passed_examples, dtype=dtype, tolerance=tolerance)


def rejects(policy: Policy, sample: Sample, number: int, level: float, answer: str = NOISE,
            dtype: str | None = None) -> bool:
    """Whether the gate rejects the sample's expected result with the noise ``answer`` of ``level`` (× its RMS, or
    relative) in its arrays of ``dtype`` (None: every one); noise too small to change an element is no wrong answer:
    not rejected."""
    wrong = wrong_answer(answer, sample.references[0], policy, number, level, None, dtype)
    return wrong is not None and not passes(policy, wrong, sample)


def smallest_rejected(policy: Policy, samples: Sequence[Sample], answer: str = NOISE,
                      dtype: str | None = None) -> float | None:
    """The smallest level of the noise ``answer`` (a share of the RMS, of each element, or under `ulp` relative noise
    in units) that some sample rejects in its arrays of ``dtype``, within BISECTION_RATIO (units: exactly), by
    bisection in log space on each sample that rejects noise just under the best level found so far (each sample's
    noise is seeded, so that whether it is rejected grows with the level); None if no sample rejects the ceiling."""
    units = answer == RELATIVE and policy.name == "ulp"
    floor, ceiling = (1.0, float(UNIT_CEILING)) if units else (NOISE_FLOOR, NOISE_CEILING)
    below: Callable[[float], float] = (lambda at: at - 1) if units else (lambda at: at / BISECTION_RATIO)
    close: Callable[[float, float], bool] = (lambda lo, hi: hi - lo <= 1) if units else \
        (lambda lo, hi: hi / lo <= BISECTION_RATIO)
    best: float | None = None
    for number, sample in enumerate(samples):
        high = ceiling if best is None else below(best)
        if high < floor or not rejects(policy, sample, number, high, answer, dtype):
            continue
        if rejects(policy, sample, number, floor, answer, dtype):
            return floor
        low = floor
        for _ in range(BISECTION_STEPS):
            if close(low, high):
                break
            middle = math.sqrt(low * high)
            middle = float(min(max(round(middle), low + 1), high - 1)) if units else middle
            if rejects(policy, sample, number, middle, answer, dtype):
                high = middle
            else:
                low = middle
        best = high
    return best


def check_declared_dtypes(policy: Policy, samples: Sequence[Sample]) -> None:
    """A tolerance given per dtype names only dtypes the gate's outputs have (the expected results of its cases and
    the oracle's), and a per-dtype `max` names every one they have; DefinitionError naming the gate file's line,
    the key and the dtype otherwise."""
    dtypes = float_dtypes(policy, samples)
    problems: list[Problem] = []
    for mapping in per_dtype_mappings(policy):
        for dtype in mapping.dtypes:
            if dtype not in dtypes:
                problems.append(Problem(_where(mapping.place(dtype)), f"{mapping.key}.{dtype}",
                                        f"the gate's outputs never have dtype {dtype}: its cases' and oracle's results "
                                        f"hold {', '.join(dtypes) or 'no float array'}, so this tolerance is never applied"))
    if isinstance(policy.max, PerDtype):
        for dtype in dtypes:
            if dtype not in policy.max.dtypes:
                problems.append(Problem(_where(policy.max.location), policy.max.key,
                                        f"names no bound for {dtype}, a dtype of the gate's outputs "
                                        f"({_first_with(policy, samples, dtype)}): give max for every dtype they have"))
    if problems:
        raise DefinitionError(problems)


def _where(location: Location | None) -> Location:
    return location or Location("<gate file>", 1, 1)


def _first_with(policy: Policy, samples: Sequence[Sample], dtype: str) -> str:
    return next(sample.label for sample in samples
                if any(array.dtype.name == dtype for array in governed(sample.references[0], policy)))


def nan_notes(policy: Policy, samples: Sequence[Sample]) -> tuple[str, ...]:
    """A note where `equal_nan: true` sits on a gate none of whose expected results holds a NaN in an array the
    policy compares: the option changes nothing the gate tests."""
    import numpy as np

    if not policy.equal_nan:
        return ()
    for sample in samples:
        for reference in sample.references:
            for array in governed(reference, policy):
                if array.dtype.name in ALLCLOSE_DEFAULTS and array.size and np.isnan(array.astype(np.float64)).any():
                    return ()
    return (f"equal_nan: true, but none of the {len(samples)} expected results (cases' and oracle's) holds a NaN "
            f"where the policy compares: the option is untested here",)
