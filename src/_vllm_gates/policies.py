"""Comparison policies a gate's `compare:` may name (issue 29 item 3), and their reading from a gate file.

A policy applies element-wise to every array inside a result; the rest of the result is compared exactly
(strict_equal). The arithmetic lives in tolerance.py, which imports numpy; this module does not.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from _vllm_gates.fields import Reader, show, type_name
from _vllm_gates.yamlsource import YMap, location_of

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


@dataclass(frozen=True)
class Policy:
    """A comparison policy as the gate file declares it; None fields take their defaults (allclose: per dtype)."""

    name: str
    rtol: float | None = None  # allclose; tokens: for the result's other float arrays (logits)
    atol: float | None = None
    max: float | None = None  # nmse: the bound on NMSE; ulp: the bound on units in the last place (an int)
    equal_nan: bool = False
    margin: float | None = None  # tokens: positions whose oracle top-2 margin (nats) is under this may differ
    max_excused: int = 0  # tokens: the most positions of one case that may be excused
    tokens: str = TOKENS_KEY  # tokens: the result map's key holding the token ids
    margins: str = MARGINS_KEY  # tokens: the expected result map's key holding the top-2 margins

    def describe(self) -> str:
        """The policy as a report names it, e.g. "allclose (rtol 1e-05, atol 1e-06)"."""
        if self.name == "allclose":
            tol = "per-dtype defaults" if self.rtol is None else f"rtol {self.rtol:g}, atol {self.atol:g}"
            return f"allclose ({tol}{', equal_nan' if self.equal_nan else ''})"
        if self.name in ("nmse", "ulp"):
            return f"{self.name} (max {self.max:g}{', equal_nan' if self.equal_nan else ''})"
        if self.name == "tokens":
            floats = "" if self.rtol is None else f", other float arrays rtol {self.rtol:g}, atol {self.atol:g}"
            return f"tokens (margin {self.margin:g} nats, max_excused {self.max_excused}{floats})"
        return self.name


def has_tolerance(policy: Policy | None) -> bool:
    """A gate under this policy has a tolerance for the strength audit to check (issue 29 item 5)."""
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
    if len(reader.problems) > before:
        return None
    return Policy(name, **found)


def _option(reader: Reader, body: YMap, option: str, key: str, policy: str) -> Any:
    """One option's value, checked; None (and a problem) when it is refused."""
    value, where = body[option], location_of(body, option)
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
