"""Where an implementation diverges from a reference (docs/divergence.md): each tap's isolated (teacher-forced) and
accumulated (free-running) error judged under the gate's compare policy, a localized break told from drift, the
first divergent logits position and the dtype boundaries. Pure numpy: the taps arrive as mappings name -> array."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from _vllm_gates.base.errors import GatesError
from _vllm_gates.definitions.model import Taps
from _vllm_gates.taps.tap_figures import Figures, figures
from _vllm_gates.taps.tap_ranks import RankFinding, rank_finding
from _vllm_gates.values.policies import Policy, allclose_tolerances
from _vllm_gates.values.tolerance import FLOAT_DTYPES, compare_under
from _vllm_gates.values.tolerance_report import how_far_off

LOCALIZED_BREAK, DRIFT = "localized break", "drift"
SHOWN_NAMES = 20  # a list of tap names in an error stops after this many, with a count of the rest
TapMap = Mapping[str, Any]


class DivergenceInputError(GatesError):
    """Taps that cannot be compared: a name one side lacks, different shapes, dtypes that cannot be compared,
    logits that are not [T, V]."""


@dataclass(frozen=True)
class Judged:
    """One tap compared one way (isolated or accumulated): the figures, the verdict and the tolerance it used; the
    numeric gates' report lines where it fails."""

    figures: Figures
    passed: bool
    used: float
    report: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TapJudgement:
    """One tap: its dtype and the reference's, its layer (None: outside the layers), whether it is a feed point,
    the tolerance it is judged by, and its isolated and accumulated errors."""

    name: str
    dtype: str
    reference_dtype: str
    shape: tuple[int, ...]
    layer: int | None
    feed_point: bool
    tolerance: str
    isolated: Judged
    accumulated: Judged


@dataclass(frozen=True)
class Classification:
    """A localized break (the first tap, feed points aside, whose isolated error fails) or drift (every isolated
    error within tolerance; ``tap``: where the accumulated error first crosses its bound, None: it never does).
    ``ranks``: the break's rank, where the gate names the ranks' partials (tap_ranks)."""

    kind: str
    tap: str | None
    layer: int | None
    report: tuple[tuple[str, str], ...] = ()
    ranks: RankFinding | None = None

    @property
    def rank(self) -> int | None:
        return self.ranks.rank if self.ranks is not None else None

    def describe(self) -> str:
        if self.kind == LOCALIZED_BREAK:
            where = f"layer {self.layer}" if self.layer is not None else "outside the layers"
            where += f", rank {self.rank}" if self.rank is not None else ""
            return f"LOCALIZED BREAK at {where}, tap {self.tap}: its isolated (teacher-forced) error exceeds the tolerance"
        crossing = (f"the accumulated error first crosses the bound at {self.tap}"
                    + (f" (layer {self.layer})" if self.layer is not None else "")) if self.tap else \
            "the accumulated error is within bounds throughout"
        return f"DRIFT, no localized break: every isolated error is within tolerance; {crossing}"


@dataclass(frozen=True)
class FirstDivergence:
    """The first position whose argmax differs between the reference's logits and the free-running
    implementation's (lowest id on an exact tie), both ids, the reference's top-2 margin there and the band a
    near-tie is judged by; ``position`` None: every position agrees."""

    positions: int
    position: int | None = None
    reference_id: int = 0
    impl_id: int = 0
    margin: float = 0.0
    band: float = 0.0
    band_source: str = ""

    @property
    def near_tie(self) -> bool:
        return self.position is not None and self.margin < self.band

    def describe(self) -> str:
        if self.position is None:
            return f"logits: the argmax agrees at all {self.positions} positions"
        judged = "near-tie" if self.near_tie else "confident"
        return (f"logits: first divergent position {self.position} of {self.positions}: reference id {self.reference_id}, "
                f"implementation id {self.impl_id}; the reference's top-2 margin there is {self.margin:.6g} "
                f"({judged}: the band is {self.band:g}, {self.band_source})")


@dataclass(frozen=True)
class DtypeBoundary:
    """A tap whose dtype is not the reference's: wider (named with its byte cost) or narrower (a likely break)."""

    tap: str
    dtype: str
    reference_dtype: str
    wider: bool
    extra_bytes: int

    def describe(self) -> str:
        if not self.wider:
            return f"{self.tap}: {self.dtype} where the reference has {self.reference_dtype}: likely break"
        return (f"{self.tap}: {self.dtype} where the reference has {self.reference_dtype}: "
                f"{self.ratio:g}x the bytes ({self.extra_bytes} bytes more)")

    @property
    def ratio(self) -> float:
        import numpy as np

        return _itemsize(np, self.dtype) / _itemsize(np, self.reference_dtype)


@dataclass(frozen=True)
class Divergence:
    """The whole localization of one case."""

    taps: tuple[TapJudgement, ...]
    classification: Classification
    first_divergence: FirstDivergence | None
    boundaries: tuple[DtypeBoundary, ...]

    @property
    def broke(self) -> bool:
        return self.classification.kind == LOCALIZED_BREAK

    @property
    def confident_without_break(self) -> bool:
        """The tokens diverge where the reference is confident, yet no tap's isolated error fails."""
        first = self.first_divergence
        return not self.broke and first is not None and first.position is not None and not first.near_tie


def localize(reference: TapMap, free: TapMap, forced: TapMap, taps: Taps, policy: Policy) -> Divergence:
    """The localization of one case from the reference's, the free-running and the teacher-forced implementation's
    taps (forward order: the reference's); DivergenceInputError when they cannot be compared."""
    _same_names(reference, free, "the implementation's free-running run")
    _same_names(reference, forced, "the implementation's teacher-forced run")
    _same_dtypes(free, forced)
    tap_policy = _array_policy(policy)
    judged = tuple(_tap(name, reference, free, forced, taps, tap_policy) for name in reference)
    classification = classify(judged)
    if classification.kind == LOCALIZED_BREAK and classification.tap is not None:
        classification = replace(classification, ranks=rank_finding(classification.tap, forced, taps, tap_policy))
    return Divergence(judged, classification, _first_divergence(reference, free, taps, policy),
                      tuple(found for name in reference if (found := dtype_boundary(name, free[name], reference[name]))))


def _array_policy(policy: Policy) -> Policy:
    """The policy one tap's array is judged by: the gate's; a tokens gate's float arrays are judged by allclose
    (its rtol and atol, else torch's per-dtype defaults), as tolerance.compare_under judges them beside the ids."""
    return Policy("allclose", rtol=policy.rtol, atol=policy.atol, equal_nan=policy.equal_nan) \
        if policy.name == "tokens" else policy


def _same_names(reference: TapMap, other: TapMap, what: str) -> None:
    lacks = [name for name in reference if name not in other]
    extra = [name for name in other if name not in reference]
    if lacks or extra:
        said = []
        if lacks:
            said.append(f"{what} lacks {_names(lacks)}")
        if extra:
            said.append(f"the reference lacks {_names(extra)}")
        raise DivergenceInputError(f"{'; '.join(said)} (the reference reports {_names(list(reference))}; {what} "
                                   f"reports {_names(list(other))})")
    for name in reference:
        ours, theirs = tuple(getattr(other[name], "shape", ())), tuple(getattr(reference[name], "shape", ()))
        if ours != theirs:
            raise DivergenceInputError(f"tap {name}: shape {list(ours)} in {what}, {list(theirs)} in the reference")
        _comparable_dtype(name, other[name], reference[name], what)


def _comparable_dtype(name: str, ours: Any, theirs: Any, what: str) -> None:
    """A float tap compares with a float one of any width (a dtype boundary); any other dtype only with its own."""
    mine, reference = ours.dtype.name, theirs.dtype.name
    if mine != reference and not (mine in FLOAT_DTYPES and reference in FLOAT_DTYPES):
        raise DivergenceInputError(f"tap {name}: dtype {mine} in {what}, {reference} in the reference: a float tap is "
                                   f"compared with a float one ({', '.join(sorted(FLOAT_DTYPES))}), any other only "
                                   f"with its own dtype")


def _same_dtypes(free: TapMap, forced: TapMap) -> None:
    """The implementation reports each tap in one dtype, free-running and teacher-forced."""
    for name, array in free.items():
        if array.dtype != forced[name].dtype:
            raise DivergenceInputError(f"tap {name}: dtype {array.dtype.name} in the implementation's free-running run, "
                                       f"{forced[name].dtype.name} in its teacher-forced run")


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN_NAMES])
    return shown + (f", and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else "") if names else "none"


def _tap(name: str, reference: TapMap, free: TapMap, forced: TapMap, taps: Taps, policy: Policy) -> TapJudgement:
    """Tap ``name`` judged isolated, then accumulated: each side's array asked for in turn, so that taps read from a
    file (tap_dumps.TapFile) hold one pair in memory at a time."""
    expected = reference[name]
    isolated = judge(policy, name, forced[name], expected)
    actual = free[name]
    dtype = actual.dtype.name
    return TapJudgement(name, dtype, expected.dtype.name, tuple(actual.shape), taps.layer_of(name), taps.is_feed_point(name),
                        policy.describe_for(dtype), isolated, judge(policy, name, actual, expected))


def judge(policy: Policy, name: str, actual: Any, reference: Any) -> Judged:
    """Tap ``name``'s ``actual`` array against the reference's: the figures against its values as given, the verdict
    under ``policy`` against them rounded once to ``actual``'s dtype (a float64 oracle's taps to the port's bfloat16)."""
    comparison = compare_under(policy, {name: actual}, {name: reference.astype(actual.dtype, copy=False)})
    if comparison.problem:  # nothing could be judged (no bound for this dtype, no element): an error, never a verdict
        raise DivergenceInputError(f"tap {name}: {comparison.problem}")
    report = () if comparison.passed else tuple(how_far_off(comparison))
    return Judged(figures(actual, reference), comparison.passed, comparison.used, report)


def classify(judged: tuple[TapJudgement, ...]) -> Classification:
    """A localized break at the first tap (forward order, feed points aside: they report what was fed) whose
    isolated verdict fails; else drift, naming the first tap whose accumulated verdict fails."""
    broken = next((tap for tap in judged if not tap.feed_point and not tap.isolated.passed), None)
    if broken is not None:
        return Classification(LOCALIZED_BREAK, broken.name, broken.layer, broken.isolated.report)
    crossed = next((tap for tap in judged if not tap.accumulated.passed), None)
    return Classification(DRIFT, crossed.name if crossed else None, crossed.layer if crossed else None,
                          crossed.accumulated.report if crossed else ())


def _first_divergence(reference: TapMap, free: TapMap, taps: Taps, policy: Policy) -> FirstDivergence | None:
    """The first position whose argmax differs (the reference's logits rounded once to the implementation's dtype,
    so an exact tie after that rounding goes to the lowest id on both sides); None where the gate names no logits."""
    import numpy as np

    if taps.logits is None:
        return None
    if taps.logits not in reference:
        raise DivergenceInputError(f"the logits tap {taps.logits!r} (taps.logits) is not among the reference's taps "
                                   f"({_names(list(reference))})")
    expected, actual = reference[taps.logits], free[taps.logits]
    if expected.ndim != 2 or expected.shape[1] < 2:
        raise DivergenceInputError(f"the logits tap {taps.logits!r} has shape {list(expected.shape)}: expected [T, V] "
                                   f"with V >= 2")
    ref_ids = np.argmax(expected.astype(actual.dtype, copy=False), axis=1)
    impl_ids = np.argmax(actual, axis=1)
    band, source = near_tie_band(policy, actual.dtype.name)
    differ = np.flatnonzero(ref_ids != impl_ids)
    if not differ.size:
        return FirstDivergence(int(expected.shape[0]), band=band, band_source=source)
    at = int(differ[0])
    row = np.sort(expected[at].astype(np.float64))
    return FirstDivergence(int(expected.shape[0]), at, int(ref_ids[at]), int(impl_ids[at]), float(row[-1] - row[-2]),
                           band, source)


def near_tie_band(policy: Policy, dtype: str) -> tuple[float, str]:
    """The margin under which a divergence is a near-tie: the gate's tokens band, else twice the tolerance's atol
    for the logits' dtype (allclose's, or torch's per-dtype default where the policy names none)."""
    if policy.name == "tokens" and policy.margin is not None:
        return policy.margin, "the gate's tokens margin"
    atol = allclose_tolerances(Policy("allclose", rtol=policy.rtol, atol=policy.atol), dtype)[1] \
        if dtype in ("float16", "bfloat16", "float32", "float64") else 0.0
    return 2 * atol, f"2 x atol {atol:g} for {dtype}"


def dtype_boundary(name: str, actual: Any, reference: Any) -> DtypeBoundary | None:
    """The tap's dtype against the reference's; None where they are the same or the reference is float64 (the
    oracle's precision, not a dtype the implementation should match)."""
    import numpy as np

    ours, theirs = actual.dtype.name, reference.dtype.name
    if ours == theirs or theirs == "float64":
        return None
    wider = _itemsize(np, ours) > _itemsize(np, theirs)
    extra = (_itemsize(np, ours) - _itemsize(np, theirs)) * int(actual.size) if wider else 0
    return DtypeBoundary(name, ours, theirs, wider, extra)


def _itemsize(np: Any, dtype: str) -> int:
    if dtype == "bfloat16":
        return 2
    return int(np.dtype(dtype).itemsize)
