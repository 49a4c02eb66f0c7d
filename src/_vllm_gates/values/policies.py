"""Comparison policies a gate's `compare:` may name (docs/gate-files.md, "Comparison policies"), and their reading from a gate file.

A policy applies element-wise to every array inside a result; the rest of the result is compared exactly
(strict_equal). The arithmetic lives in tolerance.py, which imports numpy; this module does not.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from _vllm_gates.base.errors import Location
from _vllm_gates.base.fields import Reader, show, type_name
from _vllm_gates.base.yamlsource import YMap, location_of

# torch.testing.assert_close's defaults (rtol, atol) per floating dtype, by numpy name; other dtypes compare exactly
ALLCLOSE_DEFAULTS: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}

# per policy: the options it takes (required, optional); `policy` itself is the key that names it
POLICY_OPTIONS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "exact": (frozenset(), frozenset()),
    "allclose": (frozenset(), frozenset({"rtol", "atol", "equal_nan"})),
    "nmse": (frozenset({"max"}), frozenset({"equal_nan"})),
    "ulp": (frozenset({"max"}), frozenset({"equal_nan"})),
    "tokens": (frozenset({"margin", "max_excused"}), frozenset({"tokens", "margins", "rtol", "atol"})),
}
TOLERANCE_POLICIES = frozenset({"allclose", "nmse", "ulp", "tokens"})  # those with a tolerance to audit (`exact` has none)
TOKENS_KEY, MARGINS_KEY = "tokens", "top2_margin"  # the tokens policy's default keys of the result map
PER_DTYPE_OPTIONS = frozenset({"rtol", "atol", "max"})  # the options that may be a mapping dtype -> value


@dataclass(frozen=True)
class PerDtype:
    """A tolerance given per dtype (`rtol: {float16: 2.0e-3}`, docs/gate-files.md): the dtypes it names, each with
    its value and the place it is written; a dtype it does not name keeps its default (or, for `max`, has none)."""

    values: tuple[tuple[str, float], ...]
    key: str = ""  # the gate file's key, e.g. "gates[1].compare.rtol"
    places: tuple[Location | None, ...] = ()  # where each dtype is named, in the order of ``values``
    location: Location | None = None  # where the mapping itself is written

    def get(self, dtype: str) -> float | None:
        return dict(self.values).get(dtype)

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(dtype for dtype, _ in self.values)

    def place(self, dtype: str) -> Location | None:
        """Where the mapping names ``dtype``."""
        return dict(zip(self.dtypes, self.places, strict=False)).get(dtype)

    def __str__(self) -> str:
        return "{" + ", ".join(f"{dtype}: {value:g}" for dtype, value in self.values) + "}"


Tolerance = float | PerDtype | None  # one value for every dtype, a value per dtype, or the defaults


def for_dtype(value: Tolerance, dtype: str) -> float | None:
    """A tolerance's value for ``dtype``: the number, the mapping's entry (None where it names no such dtype)."""
    return value.get(dtype) if isinstance(value, PerDtype) else value


@dataclass(frozen=True)
class Policy:
    """A comparison policy as the gate file declares it; None fields take their defaults (allclose: per dtype);
    ``rtol``, ``atol`` and ``max`` may be given per dtype (PerDtype)."""

    name: str
    rtol: Tolerance = None  # allclose; tokens: for the result's other float arrays (logits)
    atol: Tolerance = None
    max: Tolerance = None  # nmse: the bound on NMSE; ulp: the bound on units in the last place (an int)
    equal_nan: bool = False
    margin: float | None = None  # tokens: positions whose oracle top-2 margin (nats) is under this may differ
    max_excused: int = 0  # tokens: the most positions of one case that may be excused
    tokens: str = TOKENS_KEY  # tokens: the result map's key holding the token ids
    margins: str = MARGINS_KEY  # tokens: the expected result map's key holding the top-2 margins

    def describe(self) -> str:
        """The policy as a report names it, e.g. "allclose (rtol 1e-05, atol 1e-06)"."""
        nan = ", equal_nan" if self.equal_nan else ""
        if self.name == "allclose":
            return f"allclose ({self._pair()}{nan})"
        if self.name in ("nmse", "ulp"):
            return f"{self.name} (max {_shown(self.max)}{nan})"
        if self.name == "tokens":
            floats = "" if self.rtol is None else f", other float arrays {self._pair()}"
            return f"tokens (margin {self.margin:g} nats, max_excused {self.max_excused}{floats})"
        return self.name

    def describe_for(self, dtype: str) -> str:
        """The policy as it applies to arrays of ``dtype``, e.g. "allclose (float16: rtol 0.5, atol 1e-05)"."""
        nan = ", equal_nan" if self.equal_nan else ""
        if self.name in ("allclose", "tokens") and dtype in ALLCLOSE_DEFAULTS:
            rtol, atol = allclose_tolerances(self, dtype)
            return f"{self.name} ({dtype}: rtol {rtol:g}, atol {atol:g}{nan})"
        if self.name in ("nmse", "ulp") and isinstance(self.max, PerDtype):
            bound = self.max.get(dtype)
            return f"{self.name} ({dtype}: max {'none' if bound is None else format(bound, 'g')}{nan})"
        return self.describe()

    def _pair(self) -> str:
        if self.rtol is None:
            return "per-dtype defaults"
        if isinstance(self.rtol, PerDtype) and isinstance(self.atol, PerDtype):
            named = "; ".join(f"{dtype}: rtol {value:g}, atol {self.atol.get(dtype):g}" for dtype, value in self.rtol.values)
            return f"{named}; other dtypes at the per-dtype defaults"
        return f"rtol {_shown(self.rtol)}, atol {_shown(self.atol)}"


def _shown(value: Tolerance) -> str:
    return str(value) if isinstance(value, PerDtype) else f"{value:g}"


def allclose_tolerances(policy: Policy, dtype_name: str) -> tuple[float, float]:
    """The allclose (rtol, atol) for a dtype: the policy's (for that dtype, where given per dtype), else
    torch.testing.assert_close's default for it."""
    rtol, atol = for_dtype(policy.rtol, dtype_name), for_dtype(policy.atol, dtype_name)
    if rtol is not None and atol is not None:
        return rtol, atol
    return ALLCLOSE_DEFAULTS[dtype_name]


def per_dtype_mappings(policy: Policy) -> list[PerDtype]:
    """The options of ``policy`` given per dtype."""
    return [value for value in (policy.rtol, policy.atol, policy.max) if isinstance(value, PerDtype)]


def has_tolerance(policy: Policy | None) -> bool:
    """A gate under this policy has a tolerance for the strength audit to check (docs/numeric-gates.md §5)."""
    return policy is not None and policy.name in TOLERANCE_POLICIES


def read_policy(reader: Reader, body: YMap, key: str) -> Policy | None:
    """A `compare: {policy: NAME, ...}` mapping, validated; every problem names file:line, the key and the value."""
    before = len(reader.problems)
    name = body.get("policy")
    if "policy" not in body:
        reader.problem(body.location, f"{key}.policy", f"required key is missing: a compare mapping names its policy "
                                                       f"(one of {', '.join(POLICY_OPTIONS)})")
        return None
    if not isinstance(name, str) or name not in POLICY_OPTIONS:
        reader.problem(location_of(body, "policy"), f"{key}.policy",
                       f"unknown policy {show(name)} (policies: {', '.join(POLICY_OPTIONS)})")
        return None
    required, optional = POLICY_OPTIONS[name]
    reader.keys(body, key, set(required) | {"policy"}, set(optional))
    found: dict[str, Any] = {}
    for option in sorted((required | optional) & set(body)):
        value = _option(reader, body, option, f"{key}.{option}", name)
        if value is not None:
            found[option] = value
    if name in ("allclose", "tokens") and ("rtol" in body) != ("atol" in body):
        given, other = ("rtol", "atol") if "rtol" in body else ("atol", "rtol")
        reader.problem(location_of(body, given), f"{key}.{given}",
                       f"{given} is given without {other}: give both, or neither for torch.testing.assert_close's "
                       f"per-dtype defaults")
    elif name in ("allclose", "tokens") and "rtol" in found and "atol" in found:
        _paired(reader, body, key, found["rtol"], found["atol"])
    if len(reader.problems) > before:
        return None
    return Policy(name, **found)


def _paired(reader: Reader, body: YMap, key: str, rtol: Tolerance, atol: Tolerance) -> None:
    """rtol and atol apply together, per dtype: both one number, or both mappings naming the same dtypes."""
    if isinstance(rtol, PerDtype) != isinstance(atol, PerDtype):
        mapped, number = ("rtol", "atol") if isinstance(rtol, PerDtype) else ("atol", "rtol")
        reader.problem(location_of(body, mapped), f"{key}.{mapped}",
                       f"{mapped} is given per dtype and {number} as one number for every dtype: give both per dtype "
                       f"(the same dtypes), or both as numbers; a dtype named in neither keeps torch.testing.assert_close's "
                       f"defaults")
        return
    if isinstance(rtol, PerDtype) and isinstance(atol, PerDtype):
        for given, other, ours, theirs in (("rtol", "atol", rtol, atol), ("atol", "rtol", atol, rtol)):
            for dtype in ours.dtypes:
                if dtype not in theirs.dtypes:
                    reader.problem(ours.place(dtype), f"{key}.{given}.{dtype}",
                                   f"{given} names {dtype} and {other} does not: give both for {dtype}, or neither for "
                                   f"torch.testing.assert_close's defaults")


def _per_dtype(reader: Reader, body: YMap, option: str, key: str, policy: str) -> PerDtype | None:
    """A mapping dtype -> value for `rtol`, `atol` or `max`; each dtype a floating one, each value checked as the
    option's number is."""
    mapping: YMap = body[option]
    if not mapping:
        reader.problem(location_of(body, option), key, "an empty mapping: name at least one dtype, or give one number")
        return None
    values, places = [], []
    for dtype, value in mapping.items():
        where = location_of(mapping, dtype)
        if not isinstance(dtype, str) or dtype not in ALLCLOSE_DEFAULTS:
            reader.problem(where, f"{key}.{dtype}", f"unknown dtype {show(dtype)} (dtypes with a tolerance: "
                                                    f"{', '.join(ALLCLOSE_DEFAULTS)})")
            continue
        checked = _value(reader, value, where, f"{key}.{dtype}", option, policy)
        if checked is not None:
            values.append((dtype, checked))
            places.append(where)
    return PerDtype(tuple(values), key, tuple(places), location_of(body, option)) if len(values) == len(mapping) else None


def _option(reader: Reader, body: YMap, option: str, key: str, policy: str) -> Any:
    """One option's value, checked; None (and a problem) when it is refused."""
    if option in PER_DTYPE_OPTIONS and isinstance(body[option], dict):
        return _per_dtype(reader, body, option, key, policy)
    return _value(reader, body[option], location_of(body, option), key, option, policy)


def _value(reader: Reader, value: Any, where: Location | None, key: str, option: str, policy: str) -> Any:
    """One value of an option (or of one dtype of it), checked; None (and a problem) when it is refused."""
    if option == "equal_nan":
        if not isinstance(value, bool):
            reader.problem(where, key, f"expected true or false, got {type_name(value)} {show(value)}")
            return None
        return value
    if option in ("tokens", "margins"):
        if not isinstance(value, str) or not value.strip():
            reader.problem(where, key, f"expected the name of a key of the result map, got {type_name(value)} {show(value)}")
            return None
        return value
    if option in ("max_excused",) or (option == "max" and policy == "ulp"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            reader.problem(where, key, f"expected a whole number >= 0, got {type_name(value)} {show(value)}")
            return None
        return value
    number = _number(reader, value, where, key)
    if number is None:
        return None
    if option == "max" and policy == "nmse" and number >= 1:
        reader.problem(where, key, f"an NMSE bound of {show(value)} lets an all-zero answer pass (its NMSE is 1): "
                                   f"expected a number in [0, 1)")
        return None
    if option == "margin" and number <= 0:
        reader.problem(where, key, f"expected a band in nats > 0, got {show(value)}")
        return None
    return number


def _number(reader: Reader, value: Any, where: Any, key: str) -> float | None:
    """A finite number >= 0; a problem for text (YAML reads `1e-5` without a dot as text), NaN, infinity or a
    negative value."""
    if isinstance(value, str):
        hint = ""
        try:
            float(value)
            hint = f" (YAML reads {value} as text: write it with a dot, e.g. {_dotted(value)})"
        except ValueError:
            pass
        reader.problem(where, key, f"expected a number, got string {show(value)}{hint}")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        reader.problem(where, key, f"expected a number, got {type_name(value)} {show(value)}")
        return None
    if not math.isfinite(value) or value < 0:
        reader.problem(where, key, f"expected a finite number >= 0, got {show(value)}")
        return None
    return float(value)


def _dotted(text: str) -> str:
    """`1e-5` as YAML reads it as a float: `1.0e-5`."""
    mantissa, _, exponent = text.lower().partition("e")
    return f"{mantissa if '.' in mantissa else mantissa + '.0'}e{exponent}" if exponent else text
