"""Compare results under a comparison policy (docs/numeric-gates.md §2): element-wise over every array inside a result,
the rest exactly (strict_equal's rules); a visitor over the walk that exact comparison shares (valuewalk.py).

Arithmetic is float64 (ulp: exact unsigned integers), over chunks of CHUNK elements, so a comparison of two huge
arrays holds only a few chunk-sized temporaries beside them. numpy (and ml_dtypes, for bfloat16) are imported
only when a policy compares something.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from _vllm_gates.values.compare import strict_equal
from _vllm_gates.values.policies import ALLCLOSE_DEFAULTS, PerDtype, Policy, allclose_tolerances, for_dtype
from _vllm_gates.values.render import render_value, value_kind
from _vllm_gates.values.valuewalk import ABSENT, item_path, key_path, key_token, pair_keys, visit

CHUNK = 1 << 17  # elements per step: a float64 temporary is 1 MiB
WORST = 5  # the worst elements a report names per array
SHORT_INTS = 8  # a differing list of at most this many ints (a range, a shape) is reported whole, both sides shown
SHOWN = 200  # characters of a value a difference's text shows
FLOAT_DTYPES = frozenset(ALLCLOSE_DEFAULTS)


@dataclass(frozen=True)
class Element:
    """One element of an offending array: its index and both values."""

    index: tuple[int, ...]
    actual: Any
    expected: Any
    score: float = 0.0  # how bad, in the policy's terms (allclose: error / allowed; ulp: units; else |error|)
    margin: float | None = None  # tokens: the oracle's top-2 margin there


@dataclass(frozen=True)
class ArrayFinding:
    """How far one array of the result is from the expected one (its report is rendered by tolerance_report)."""

    path: str
    shape: tuple[int, ...]
    dtype: str
    total: int
    passed: bool
    used: float  # the fraction of its tolerance it used (passing: <= 1)
    mismatched: int = 0
    max_abs: Element | None = None
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    nmse: float = 0.0
    worst: tuple[Element, ...] = ()
    excused: tuple[Element, ...] = ()  # tokens: the positions excused as near-ties (the first WORST of them shown)
    excused_count: int = 0
    why: str = ""  # what failed beyond the element counts (the NMSE over its bound, too many excused positions)


@dataclass(frozen=True)
class Difference:
    """A part of the result outside the arrays' elements that differs: a value, a length, a key, a dtype, a shape."""

    path: str
    text: str


@dataclass(frozen=True)
class Comparison:
    """A whole result compared under a policy: the arrays, the other differences, and whether it could be judged."""

    policy: Policy
    arrays: tuple[ArrayFinding, ...] = ()
    differences: tuple[Difference, ...] = ()
    compared: int = 0  # array elements compared (token positions, for tokens)
    problem: str = ""  # why nothing can be judged (ERROR, never a pass): nothing compared, broken margins

    @property
    def passed(self) -> bool:
        return not self.problem and not self.differences and all(found.passed for found in self.arrays)

    @property
    def used(self) -> float:
        """The most of its tolerance any array used (0 for exact)."""
        return max((found.used for found in self.arrays), default=0.0)

    @property
    def excused(self) -> int:
        return sum(found.excused_count for found in self.arrays)


def compare_under(policy: Policy, actual: Any, expected: Any, describe: bool = True) -> Comparison:
    """``actual`` against ``expected`` under ``policy``; a result with no array element compared is a problem.
    ``describe=False``: a failing array's report figures are not computed (the tolerance audit asks pass or fail)."""
    walk = _UnderPolicy(policy, describe=describe)
    visit(walk, "result", actual, expected)
    problem = walk.problem
    if not problem and not walk.differences and walk.compared == 0:
        problem = (f"nothing compared: the {policy.name} policy compares arrays, and "
                   + ("every array in the result has zero elements" if walk.findings else "the result holds no array")
                   + (f" (expected: {render_value(expected, 200)})" if not walk.findings else ""))
    if policy.name == "tokens" and not walk.token_maps and not problem and not walk.differences:
        problem = (f"nothing compared: the tokens policy needs a map with keys {policy.tokens!r} and {policy.margins!r} "
                   f"in the expected result")
    return Comparison(policy, tuple(walk.findings), tuple(walk.differences), walk.compared, problem)


def _items(count: int) -> str:
    return f"{count} item" if count == 1 else f"{count} items"


def _both(actual: Any, expected: Any) -> str:
    """Two differing values, each cut at SHOWN characters: "[24, 48] where [0, 24] is expected"."""
    return f"{render_value(actual, SHOWN)} where {render_value(expected, SHOWN)} is expected"


def _short_ints(value: Any) -> bool:
    """A list of 1 to SHORT_INTS exact ints (bools are not): a range or a shape, read as one value when it differs."""
    return isinstance(value, (list, tuple)) and 0 < len(value) <= SHORT_INTS and all(type(v) is int for v in value)


@dataclass
class _UnderPolicy:
    """A visitor over the shared walk (valuewalk.py): arrays compared under the policy, everything else exactly."""

    policy: Policy
    describe: bool = True
    findings: list[ArrayFinding] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    compared: int = 0
    token_maps: int = 0
    problem: str = ""

    def arrays(self, path: str, actual: Any, expected: Any) -> None:
        import numpy as np

        if not (isinstance(actual, np.ndarray) and isinstance(expected, np.ndarray)):
            self.differences.append(Difference(path, f"{value_kind(actual)} where {value_kind(expected)} is expected"))
            return
        found = self._array(path, actual, expected, False)
        if found is not None:
            self.compared += found.total
            self.findings.append(found)

    def lists(self, path: str, actual: Any, expected: Any) -> None:
        if len(actual) != len(expected):
            self.differences.append(Difference(path, f"{_items(len(actual))} where {len(expected)} "
                                                     f"{'is' if len(expected) == 1 else 'are'} expected: "
                                                     f"{_both(actual, expected)}"))
            return
        if _short_ints(actual) and _short_ints(expected) and list(actual) != list(expected):
            self.differences.append(Difference(path, _both(actual, expected)))
            return
        for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
            visit(self, item_path(path, index), a, e)

    def maps(self, path: str, actual: dict[Any, Any], expected: dict[Any, Any]) -> None:
        tokens = self.policy.name == "tokens" and self.policy.tokens in expected and self.policy.margins in expected
        keys = pair_keys(actual, expected)
        skipped = {key_token(self.policy.margins)} if tokens else set()
        missing = [theirs for token, ours, theirs in keys.entries() if ours is ABSENT and token not in skipped]
        extra = [ours for _, ours, theirs in keys.entries() if theirs is ABSENT]
        if missing or extra or not keys.distinct:
            said = ([f"missing {', '.join(map(repr, missing))}"] if missing else []) + \
                   ([f"unexpected {', '.join(map(repr, extra))}"] if extra else [])
            self.differences.append(Difference(path, "keys differ: " + ("; ".join(said) or "keys that compare equal")))
            return
        for token, ours, theirs in keys.entries():
            if token in skipped:
                continue  # the oracle's margins decide; an actual result's own margins are not compared
            inner = key_path(path, theirs)
            if tokens and theirs == self.policy.tokens:
                self._tokens(inner, actual[ours], expected[theirs], expected[self.policy.margins])
            else:
                visit(self, inner, actual[ours], expected[theirs])

    def leaves(self, path: str, actual: Any, expected: Any) -> None:
        if not strict_equal(actual, expected):
            self.differences.append(Difference(path, _both(actual, expected)))

    def _tokens(self, path: str, actual: Any, expected: Any, margins: Any) -> None:
        """A token map's ids under the tokens policy, excused where the expected side's margins are under the band."""
        import numpy as np

        self.token_maps += 1
        if not (isinstance(expected, np.ndarray) and expected.dtype.kind in "iu"):
            self.problem = f"{path}: the tokens policy compares an integer array of token ids, the expected result has {value_kind(expected)}"
            return
        if not (isinstance(margins, np.ndarray) and margins.dtype.name in FLOAT_DTYPES and margins.shape == expected.shape):
            self.problem = (f"{path}: the expected result's {self.policy.margins!r} must be a float array of the tokens' shape "
                            f"{list(expected.shape)}, got {value_kind(margins)}")
            return
        if not isinstance(actual, np.ndarray):
            self.differences.append(Difference(path, f"{value_kind(actual)} where {value_kind(expected)} is expected"))
            return
        found = self._array(path, actual, expected, True, margins)
        if found is not None:
            self.compared += found.total
            self.findings.append(found)

    def _array(self, path: str, actual: Any, expected: Any, exact: bool, margins: Any = None) -> ArrayFinding | None:
        if actual.dtype != expected.dtype or actual.shape != expected.shape:
            self.differences.append(Difference(path, f"{value_kind(actual)} where {value_kind(expected)} is expected (never cast)"))
            return None
        name = actual.dtype.name
        if name not in FLOAT_DTYPES and actual.dtype.kind not in "biu":
            self.problem = f"{path}: arrays of dtype {name} cannot be compared (bool, integer and float dtypes only)"
            return None
        if margins is not None:
            found, problem = _judge_tokens(self.policy, path, actual, expected, margins)
            self.problem = self.problem or problem
            return found
        if not exact and name in FLOAT_DTYPES and self.policy.name in ("nmse", "ulp") and bound(self.policy, name) is None:
            named = self.policy.max.dtypes if isinstance(self.policy.max, PerDtype) else ()
            self.problem = (f"{path}: a {name} array, and the {self.policy.name} policy's max names no bound for {name} "
                            f"(it names {', '.join(named)}): give max for every dtype of the gate's outputs")
            return None
        return _judge(self._element_policy() if not exact and name in FLOAT_DTYPES else Policy("exact"), path, actual,
                      expected, self.describe)

    def _element_policy(self) -> Policy:
        """The policy of a float array: the gate's; under tokens, allclose (its rtol/atol, else the per-dtype
        defaults) for the arrays beside the ids, such as a greedy decode's logits."""
        if self.policy.name == "tokens":
            return Policy("allclose", rtol=self.policy.rtol, atol=self.policy.atol)
        return self.policy


tolerances = allclose_tolerances  # the allclose (rtol, atol) for a dtype (policies.py)


def bound(policy: Policy, dtype_name: str) -> float | None:
    """The nmse or ulp policy's `max` for arrays of a dtype (None: a mapping that does not name it)."""
    return for_dtype(policy.max, dtype_name)


def _flat(array: Any) -> Any:
    """The elements in row-major order, as a view where the array is C-contiguous (decoded results are)."""
    import numpy as np

    return array.reshape(-1) if array.flags.c_contiguous else np.ravel(array, order="C")


def _chunks(total: int) -> Iterator[slice]:
    for start in range(0, total, CHUNK):
        yield slice(start, min(start + CHUNK, total))


def _bits(values: Any) -> Any:
    """The raw bits of float elements as unsigned integers of their width."""
    import numpy as np

    return values.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[values.dtype.itemsize])


def _ulps(actual: Any, expected: Any) -> Any:
    """Units in the last place between float elements, exact, as uint64 (±0 are 0 apart)."""
    import numpy as np

    width = actual.dtype.itemsize * 8
    sign = np.uint64(1) << np.uint64(width - 1)
    a, e = _bits(actual).astype(np.uint64), _bits(expected).astype(np.uint64)
    a_mag, e_mag = a & ~sign, e & ~sign
    same_side = (a & sign) == (e & sign)
    apart = np.where(a_mag > e_mag, a_mag - e_mag, e_mag - a_mag)
    return np.where(same_side, apart, a_mag + e_mag)


def _scores(policy: Policy, actual: Any, expected: Any) -> tuple[Any, Any]:
    """Per element of one chunk: whether it is out of tolerance, and its score (how bad, in the policy's terms)."""
    import numpy as np

    if policy.name == "exact" or actual.dtype.name not in FLOAT_DTYPES:
        differ = (_bits(actual) != _bits(expected)) if actual.dtype.name in FLOAT_DTYPES else (actual != expected)
        if not differ.any():
            return differ, np.zeros(differ.shape)
        with np.errstate(invalid="ignore", over="ignore"):
            error = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
        return differ, np.where(differ, np.where(np.isnan(error), np.inf, error), 0.0)  # ranked by |error|
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    same = a == e
    if policy.equal_nan:
        same |= np.isnan(a) & np.isnan(e)
    if policy.name == "ulp":
        finite = np.isfinite(a) & np.isfinite(e)
        units = _ulps(actual, expected)
        bad = ~same & (~finite | (units > np.uint64(int(bound(policy, actual.dtype.name) or 0))))
        return bad, np.where(same, 0.0, np.where(finite, units.astype(np.float64), np.inf))
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: a NaN error, told apart below
        error = np.abs(a - e)
    if policy.name == "nmse":
        with np.errstate(over="ignore"):  # a score only ranks the worst elements; inf ranks first
            return ~same, np.where(same, 0.0, np.where(np.isfinite(error), error * error, np.inf))
    rtol, atol = tolerances(policy, actual.dtype.name)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(same, 0.0, np.where(np.isfinite(error), error / (atol + rtol * np.abs(e)), np.inf))
    ratio = np.where(np.isnan(ratio), np.inf, ratio)  # 0/0 where nothing is allowed and the values differ
    return ratio > 1.0, ratio


def _judge(policy: Policy, path: str, actual: Any, expected: Any, describe: bool = True) -> ArrayFinding:
    """Pass or fail, and the tolerance used; a failing array is then described (_describe)."""
    import numpy as np

    a_flat, e_flat = _flat(actual), _flat(expected)
    total = a_flat.size
    worst_score, bad_any = 0.0, False
    sums, non_finite = SquareSums(), 0
    nmse = policy.name == "nmse" and actual.dtype.name in FLOAT_DTYPES
    allowed = (bound(policy, actual.dtype.name) or 0.0) if policy.name in ("nmse", "ulp") else 0.0
    for part in _chunks(total):
        bad, score = _scores(policy, a_flat[part], e_flat[part])
        if nmse:
            a, e = a_flat[part].astype(np.float64), e_flat[part].astype(np.float64)
            finite = np.isfinite(a) & np.isfinite(e)
            non_finite += int(np.count_nonzero(bad & ~finite))
            sums.add(a[finite], e[finite])
            bad_any = bad_any or bool(bad.any())
        else:
            bad_any = bad_any or bool(bad.any())
            if score.size:
                worst_score = max(worst_score, float(score.max()))
            if bad_any and not describe:
                break  # pass or fail is all that is asked, and it fails
    if nmse:
        measured = sums.nmse()
        # a bound of 0 asks for equal elements: an NMSE too small for float64 (under ~1e-300) is still a difference
        passed = non_finite == 0 and measured <= allowed and (allowed > 0.0 or not bad_any)
        used = _fraction(measured, allowed)
    elif policy.name == "ulp" and actual.dtype.name in FLOAT_DTYPES:
        passed, used = not bad_any, _fraction(worst_score, allowed)
    else:
        passed, used = not bad_any, (worst_score if policy.name == "allclose" and actual.dtype.name in FLOAT_DTYPES else 0.0)
    shape, dtype = tuple(actual.shape), actual.dtype.name
    if passed or not describe:
        return ArrayFinding(path, shape, dtype, total, passed, used)
    return _describe(policy, path, actual, expected, used)


@dataclass
class SquareSums:
    """Σ(a-e)² and Σe² over pairs of finite float64 values, each kept as scale² × sum where scale is the largest
    magnitude of a or e seen so far: every term is then at most 4, so no square under- or overflows wherever in
    float64's range (subnormals included) the values lie, and the NMSE, their ratio, is exact to rounding."""

    scale: float = 0.0
    error: float = 0.0  # Σ((a-e)/scale)²
    expected: float = 0.0  # Σ(e/scale)²

    def add(self, a: Any, e: Any) -> None:
        import numpy as np

        if not a.size:
            return
        top = float(max(np.max(np.abs(a)), np.max(np.abs(e))))
        if top == 0.0:
            return  # zeros add nothing to either sum
        if top > self.scale:
            shrink = (self.scale / top) ** 2  # a ratio <= 1: it can only underflow, to sums that are negligible anyway
            self.error, self.expected, self.scale = self.error * shrink, self.expected * shrink, top
        a_scaled, e_scaled = a / self.scale, e / self.scale
        difference = a_scaled - e_scaled
        self.error += float(np.dot(difference, difference))
        self.expected += float(np.dot(e_scaled, e_scaled))

    def nmse(self) -> float:
        return _nmse(self.error, self.expected)


def _nmse(squared_error: float, squared_expected: float) -> float:
    """Σ(a-e)² / Σe²; an all-zero expectation is matched exactly (0) or not at all (inf)."""
    if squared_expected == 0.0:
        return 0.0 if squared_error == 0.0 else math.inf
    return squared_error / squared_expected


def _fraction(measured: float, allowed: float) -> float:
    if allowed == 0.0:
        return 0.0 if measured == 0.0 else math.inf
    return measured / allowed


def _describe(policy: Policy, path: str, actual: Any, expected: Any, used: float) -> ArrayFinding:
    """A failing array's report figures: mismatches, max absolute and relative error, NMSE, the worst elements."""
    import numpy as np

    a_flat, e_flat = _flat(actual), _flat(expected)
    total = a_flat.size
    mismatched, sums = 0, SquareSums()
    max_abs, max_abs_at, max_rel = -1.0, 0, 0.0
    worst: list[tuple[float, int]] = []  # a min-heap of the WORST highest (score, flat index)
    for part in _chunks(total):
        bad, score = _scores(policy, a_flat[part], e_flat[part])
        mismatched += int(np.count_nonzero(bad))
        a, e = a_flat[part].astype(np.float64), e_flat[part].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            difference = a - e
            finite = np.isfinite(a) & np.isfinite(e)
            sums.add(a[finite], e[finite])
            error = np.abs(difference, out=difference)
            error[np.isnan(error)] = np.inf
            error[(a == e) | (np.isnan(a) & np.isnan(e))] = 0.0
            relative = np.divide(error, np.abs(e), out=np.zeros_like(error), where=error != 0.0)
        at = int(np.argmax(error))
        if error[at] > max_abs:
            max_abs, max_abs_at = float(error[at]), part.start + at
        max_rel = max(max_rel, float(np.max(relative)))
        at_bad = np.flatnonzero(bad)
        if at_bad.size > WORST:
            at_bad = at_bad[np.argpartition(score[at_bad], at_bad.size - WORST)[at_bad.size - WORST:]]
        for i in at_bad:
            entry = (float(score[i]), -(part.start + int(i)))  # ties: the first index ranks higher
            heapq.heappush(worst, entry) if len(worst) < WORST else heapq.heappushpop(worst, entry)
    shown = [_element(actual, expected, -at, score) for score, at in sorted(worst, reverse=True)]
    why = ""
    measured = sums.nmse()
    allowed = (bound(policy, actual.dtype.name) or 0.0) if policy.name == "nmse" else 0.0
    if policy.name == "nmse" and actual.dtype.name in FLOAT_DTYPES and mismatched:
        why = f"NMSE {measured:.6g} > max {allowed:g}" if math.isfinite(measured) and measured > allowed else \
            f"NMSE {measured:.6g} with max 0: elements differ" if math.isfinite(measured) and allowed == 0.0 else \
            "non-finite values differ"
    return ArrayFinding(path, tuple(actual.shape), actual.dtype.name, total, False, used, mismatched,
                        _element(actual, expected, max_abs_at, 0.0), max(max_abs, 0.0), max_rel, measured,
                        tuple(shown), why=why)


def _element(actual: Any, expected: Any, flat_index: int, score: float, margins: Any = None) -> Element:
    import numpy as np

    index = tuple(int(i) for i in np.unravel_index(flat_index, actual.shape)) if actual.shape else ()
    return Element(index, _scalar(_flat(actual)[flat_index]), _scalar(_flat(expected)[flat_index]), score,
                   None if margins is None else float(_flat(margins)[flat_index]))


def _scalar(value: Any) -> Any:
    """A numpy element as the Python number a report prints (bfloat16 and float16 as the float they are)."""
    kind = getattr(getattr(value, "dtype", None), "kind", "")
    if kind == "b":
        return bool(value)
    if kind in "iu":
        return int(value)
    return float(value)


def _judge_tokens(policy: Policy, path: str, actual: Any, expected: Any, margins: Any) -> tuple[ArrayFinding | None, str]:
    """Token ids exact, except positions where the expected side's top-2 margin is under the band; each excused
    position counted, at most ``max_excused``; a case whose every position is within the band shows nothing."""
    import numpy as np

    band = float(policy.margin or 0.0)
    m_flat = _flat(margins).astype(np.float64)
    if m_flat.size and not (np.all(np.isfinite(m_flat)) and m_flat.min() >= 0):
        at = int(np.argmax(~np.isfinite(m_flat) | (m_flat < 0)))
        index = [int(i) for i in np.unravel_index(at, margins.shape)]
        return None, f"{path}: the expected top-2 margin at {index} is {float(m_flat[at])!r}: margins are finite numbers >= 0"
    if m_flat.size and bool(np.all(m_flat < band)):
        return None, (f"{path}: every one of its {m_flat.size} positions is within the near-tie band of {band:g} nats, so "
                      f"any answer would be excused: the case compares nothing")
    a_flat, e_flat = _flat(actual), _flat(expected)
    differ = a_flat != e_flat
    excusable = m_flat < band
    excused_at = np.flatnonzero(differ & excusable)
    unexcused = int(np.count_nonzero(differ & ~excusable))
    cap = policy.max_excused
    passed = unexcused == 0 and excused_at.size <= cap
    used = _fraction(float(excused_at.size), float(cap))
    excused = tuple(_element(actual, expected, int(i), 0.0, margins) for i in excused_at[:WORST])
    common: dict[str, Any] = dict(excused=excused, excused_count=int(excused_at.size))
    if passed:
        return ArrayFinding(path, tuple(actual.shape), actual.dtype.name, a_flat.size, True, used, **common), ""
    wrong = np.flatnonzero(differ & ~excusable)
    worst = tuple(_element(actual, expected, int(i), math.inf, margins) for i in wrong[:WORST])
    why = (f"{unexcused} position(s) differ where the oracle's margin is at least {band:g} nats" if unexcused else
           f"{excused_at.size} positions excused as near-ties, more than max_excused {cap}")
    return ArrayFinding(path, tuple(actual.shape), actual.dtype.name, a_flat.size, False, used,
                        int(np.count_nonzero(differ)), worst=worst, why=why, **common), ""
