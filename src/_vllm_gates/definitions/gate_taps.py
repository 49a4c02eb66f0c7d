"""A gate's `taps:` key (docs/gate-files.md, "Taps of a model gate"): what `gates diverge` needs to open the gate,
read with a problem at file:line naming the key and the value for every mistake."""
from __future__ import annotations

import re

from _vllm_gates.base.errors import Location
from _vllm_gates.base.fields import Reader, show, type_name
from _vllm_gates.base.yamlsource import YMap, location_of
from _vllm_gates.definitions.model import LAYER_INDEX, RANK_INDEX, Taps
from _vllm_gates.values.policies import Policy, has_tolerance

TAPS_REQUIRED = {"feed", "feed_points", "layer"}
TAPS_OPTIONAL = {"logits", "rank"}
INPUT_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TAP_NAME = re.compile(r"^[A-Za-z0-9_{}][A-Za-z0-9_.{}-]*$")
RANK_SUFFIX = re.compile(r"^[A-Za-z0-9_.-]*(\{r\}[A-Za-z0-9_.-]*)*$")  # braces only as the rank index


def read_taps(reader: Reader, gate: YMap, key: str, has_oracle: bool, policy: Policy | None) -> Taps | None:
    """The gate's `taps:`; None (with problems) when any part of it is refused, or when the gate lacks the oracle
    or the tolerance-bearing `compare:` policy a divergence is judged against."""
    if "taps" not in gate:
        return None
    where, taps_key = location_of(gate, "taps"), f"{key}.taps"
    body = reader.mapping(gate["taps"], taps_key, where)
    if body is None:
        return None
    before = len(reader.problems)
    reader.keys(body, taps_key, TAPS_REQUIRED, TAPS_OPTIONAL)
    if not has_oracle:
        reader.problem(where, taps_key, "a gate with `taps:` needs an `oracle`: the reference whose taps the "
                                        "implementation's are compared with")
    if not has_tolerance(policy):
        named = f"policy {policy.name!r}, which has no tolerance" if policy is not None else "no compare policy"
        reader.problem(where, taps_key, f"a gate with `taps:` needs a `compare:` policy with a tolerance (allclose, nmse, "
                                        f"ulp or tokens) to judge each tap by; the gate has {named}")
    feed = reader.string(body, "feed", f"{taps_key}.feed", INPUT_KEY)
    layer = _pattern(reader, body, "layer", f"{taps_key}.layer", indexed=True)
    logits = _pattern(reader, body, "logits", f"{taps_key}.logits", indexed=False) if "logits" in body else None
    points = _feed_points(reader, body, f"{taps_key}.feed_points", layer)
    rank = _rank_suffix(reader, body, f"{taps_key}.rank") if "rank" in body else None
    if len(reader.problems) > before or feed is None or layer is None or points is None:
        return None
    return Taps(feed, points, layer, logits, where, rank)


def _rank_suffix(reader: Reader, body: YMap, key: str) -> str | None:
    """The suffix naming a rank's partial of a reduced tap: the rank index `{r}` exactly once, no other brace."""
    value = reader.string(body, "rank", key, RANK_SUFFIX)
    if value is not None and value.count(RANK_INDEX) != 1:
        reader.problem(location_of(body, "rank"), key, f"suffix {show(value)} must hold the rank index {RANK_INDEX} "
                                                       f"exactly once (it holds it {value.count(RANK_INDEX)} times)")
        return None
    return value


def _pattern(reader: Reader, body: YMap, name: str, key: str, indexed: bool) -> str | None:
    """A tap name (``indexed``: a pattern holding `{i}` exactly once; else holding none)."""
    value = reader.string(body, name, key, TAP_NAME)
    return value if value is not None and _placeholder_ok(reader, location_of(body, name), key, value, indexed) else None


def _placeholder_ok(reader: Reader, where: Location | None, key: str, value: str, indexed: bool) -> bool:
    """Whether ``value`` holds `{i}` as it must (``indexed``: exactly once; else never) and no other brace."""
    count = value.count(LAYER_INDEX)
    stray = value.replace(LAYER_INDEX, "")
    if "{" in stray or "}" in stray:
        reader.problem(where, key, f"pattern {show(value)} has a brace that is not the layer index {LAYER_INDEX}")
        return False
    if indexed and count != 1:
        reader.problem(where, key, f"pattern {show(value)} must hold the layer index {LAYER_INDEX} exactly once "
                                   f"(it holds it {count} times)")
        return False
    if not indexed and count:
        reader.problem(where, key, f"{show(value)} names one tap: it holds no layer index {LAYER_INDEX}")
        return False
    return True


def _feed_points(reader: Reader, body: YMap, key: str, layer: str | None) -> tuple[str, ...] | None:
    """The feed points: a non-empty list of patterns; one that starts with the layer pattern's prefix (`layers.`)
    names a point in every layer, so it needs `{i}`."""
    if "feed_points" not in body:
        return None
    value = body["feed_points"]
    if not isinstance(value, list):
        reader.problem(location_of(body, "feed_points"), key, f"expected a list of tap name patterns, got "
                                                               f"{type_name(value)} {show(value)}")
        return None
    if not value:
        reader.problem(location_of(body, "feed_points"), key, "an empty list: name at least one feed point "
                                                               "(a teacher-forced run feeds the reference's values there)")
        return None
    before = len(reader.problems)
    patterns, places = reader.string_list(body, "feed_points", key, TAP_NAME)
    prefix = layer.split(LAYER_INDEX)[0] if layer else None
    for index, (pattern, place) in enumerate(zip(patterns, places, strict=True)):
        if prefix and pattern.startswith(prefix) and LAYER_INDEX not in pattern:
            reader.problem(place, f"{key}[{index}]", f"pattern {show(pattern)} names a point inside the layers "
                                                     f"({show(layer)}) without the layer index {LAYER_INDEX}: a feed "
                                                     f"point is fed in every layer")
        else:
            _placeholder_ok(reader, place, f"{key}[{index}]", pattern, indexed=LAYER_INDEX in pattern)
    return tuple(patterns) if len(reader.problems) == before else None
