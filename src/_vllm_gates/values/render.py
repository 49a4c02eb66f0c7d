"""Render inputs and results for failure reports: YAML for plain data, a tensor as its dtype, shape and first
elements, repr for anything else; where two results differ, the paths that differ (docs/gate-files.md)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from _vllm_gates.values.compare import PathDifference, differences
from _vllm_gates.wire.tensors import is_array, summary, wire_name

_PLAIN = (str, int, float, bool, type(None))


def is_plain(value: Any) -> bool:
    """Data that YAML can write back as a case input."""
    if isinstance(value, _PLAIN):
        return True
    if isinstance(value, (list, tuple)):
        return all(is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_plain(v) for k, v in value.items())
    return False


def _listify(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_listify(v) for v in value]
    if isinstance(value, dict):
        return {k: _listify(v) for k, v in value.items()}
    return value


def render_value(value: Any, limit: int = 2000) -> str:
    """One-line flow YAML for plain data, repr otherwise; long renderings are cut with a marker."""
    if is_plain(value):
        text = yaml.safe_dump(_listify(value), default_flow_style=True, sort_keys=False, width=10**6, allow_unicode=True).strip()
        if text.endswith("\n..."):
            text = text[:-4].strip()
        if text.endswith("..."):
            text = text[:-3].strip()
    else:
        text = repr(_shown(value))
    return text if len(text) <= limit else text[:limit] + f" ... ({len(text) - limit} more characters)"


MAX_PATHS = 10  # the differing paths a mismatch report lists before the two whole results
PATH_VALUE_CHARS = 100  # a value in a differing path's line is cut at this many characters


@dataclass(frozen=True)
class DifferingPaths:
    """Where two results differ under strict equality, as a mismatch report lists them: the first MAX_PATHS lines
    ("result.ranks[0].vocab_range[1]: 192 where 128 is expected") and how many paths differ in all (``counted``:
    False where the walk stopped counting them, at compare.COUNTED)."""

    shown: tuple[str, ...]
    count: int
    counted: bool = True

    def lines(self) -> list[tuple[str, str]]:
        """The report's "differs" lines, the count of the rest last."""
        rest = self._more(self.count - len(self.shown))
        return [("differs", text) for text in self.shown] + ([("differs", f"... {rest}")] if rest else [])

    def headline(self, headline: str) -> str:
        """A mismatch's headline naming the first differing path (and how many more differ)."""
        rest = self._more(self.count - 1)
        return f"{headline} at {self.shown[0]}" + (f" ({rest})" if rest else "")

    def _more(self, more: int) -> str:
        if not more:
            return ""
        paths = "path differs" if more == 1 and self.counted else "paths differ"
        return f"and {'' if self.counted else 'at least '}{more} more {paths}"


def differing_paths(actual: Any, expected: Any) -> DifferingPaths | None:
    """The paths where ``actual`` differs from ``expected`` (compare.differences: strict_equal's own walk); None where
    they are equal, or where the only difference is the whole value's (two scalars, two kinds) and the two whole
    values, shown beside, say it."""
    found = differences(actual, expected, MAX_PATHS)
    if not found.shown or (found.count == 1 and found.shown[0].path == "result" and found.shown[0].what == "value"):
        return None
    return DifferingPaths(tuple(f"{d.path}: {_difference_text(d)}" for d in found.shown), found.count, found.complete)


def _difference_text(difference: PathDifference) -> str:
    """What differs at one path, "got where expected": values, kinds where they differ, lengths, keys, elements."""
    actual, expected = difference.actual, difference.expected
    if difference.what == "length":
        return f"{_items(len(actual))} where {len(expected)} {'is' if len(expected) == 1 else 'are'} expected"
    if difference.what == "missing":
        return f"missing where {_cut(expected)} is expected"
    if difference.what == "unexpected":
        return f"{_cut(actual)} where no such key is expected"
    if difference.what == "keys":
        return "the entries under keys equal among themselves (NaN keys) differ"
    if difference.what == "elements":
        at = difference.first
        return (f"{difference.count} of {actual.size} elements differ, the first at [{', '.join(map(str, at))}]: "
                f"{_element(actual, expected, at)}")
    if value_kind(actual) == value_kind(expected):
        return f"{_cut(actual)} where {_cut(expected)} is expected"
    return f"{_kinded(actual)} where {_kinded(expected)} is expected"


def _element(actual: Any, expected: Any, at: tuple[int, ...]) -> str:
    """Two differing elements, with their bits where their values print alike (two NaNs of other payloads)."""
    got, want = repr(actual[at].item()), repr(expected[at].item())
    if got == want:
        got, want = f"{got} ({_bits(actual[at])})", f"{want} ({_bits(expected[at])})"
    return f"{got} where {want} is expected"


def _bits(element: Any) -> str:
    """An array element's bits, most significant first: "bits 0x7fc00001"."""
    import numpy

    return "bits 0x" + numpy.asarray(element).astype(element.dtype.newbyteorder(">")).tobytes().hex()


def _items(count: int) -> str:
    return f"{count} item" if count == 1 else f"{count} items"


def _cut(value: Any) -> str:
    return render_value(value, PATH_VALUE_CHARS)


def _kinded(value: Any) -> str:
    """A value with its kind, where two kinds differ: "1.0 (a float)", "null", "a float32 array of shape [2]"."""
    if is_array(value):
        return value_kind(value)
    return "null" if value is None else f"{_cut(value)} ({value_kind(value)})"


def value_kind(value: Any) -> str:
    """How a report names a value's kind: "a float32 array of shape [2, 3]", "a list", "an int"."""
    if is_array(value):
        name = f"{value.dtype.name} array of shape {list(value.shape)}"
    else:
        name = {dict: "map", list: "list", tuple: "list", bool: "bool", int: "int", float: "float", str: "string",
                type(None): "null"}.get(type(value), type(value).__name__)
    return f"{'an' if name[0] in 'aeio' else 'a'} {name}"  # a uint8 array


class _Summary:
    """A tensor where a rendering shows it: its repr is the summary."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _shown(value: Any, budget: list[int] | None = None) -> Any:
    """The value with each tensor in it replaced by its summary (containers copied only where one holds a tensor);
    at most 10,000 containers are looked into, so a huge or self-containing value costs no more than that."""
    if is_array(value):
        return _Summary(summary(value))
    if not isinstance(value, (list, tuple, dict)):
        return value
    budget = [10_000] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0:
        return value
    if isinstance(value, dict):
        items = {k: _shown(v, budget) for k, v in value.items()}
        return value if all(items[k] is v for k, v in value.items()) else items
    shown = [_shown(v, budget) for v in value]
    if all(a is b for a, b in zip(shown, value, strict=True)):
        return value
    return shown if isinstance(value, list) else tuple(shown)


def render_case(name: str, data: Any) -> str:
    """A YAML snippet to paste under a gate's `cases:` to replay this input; a tensor in it written inline in the
    case spelling (`{tensor: {dtype, shape, values}}`, docs/gate-files.md), one of more than INLINE_ELEMENTS
    elements only named, as too large to write (the rerun line replays it)."""
    large = _large_tensor(data, "input")
    if large:
        return f"# the input cannot be written as a case: {large} is too large to write inline (at most " \
               f"{INLINE_ELEMENTS} elements are): replay the example with the rerun line"
    spelled = _spelled(data)
    if not is_plain(spelled):
        return f"# input is not plain data and cannot be written as a case: {render_value(data)}"
    block = yaml.dump({name: {"input": spelled}}, Dumper=_CaseDumper, default_flow_style=False, sort_keys=False,
                      allow_unicode=True, width=120)
    return block.rstrip()


INLINE_ELEMENTS = 256  # the most elements of one tensor a pasted case writes inline


class _Flow(dict):
    """A tensor's spelling in a rendered case: written as one flow mapping."""


class _CaseDumper(yaml.SafeDumper):
    """safe_dump's writer, with tensor spellings in flow style."""


_CaseDumper.add_representer(_Flow, lambda dumper, value: dumper.represent_mapping("tag:yaml.org,2002:map", value.items(),
                                                                                 flow_style=True))


def _large_tensor(value: Any, place: str, budget: list[int] | None = None) -> str:
    """The first tensor in ``value`` of more than INLINE_ELEMENTS elements, as "input.x (float32, shape [64, 64])"."""
    budget = [10_000] if budget is None else budget
    budget[0] -= 1
    if is_array(value):
        return f"{place} ({wire_name(value.dtype) or value.dtype}, shape {list(value.shape)})" \
            if value.size > INLINE_ELEMENTS else ""
    if budget[0] < 0:
        return ""
    if isinstance(value, dict):
        return next((found for k, v in value.items() if (found := _large_tensor(v, f"{place}.{k}", budget))), "")
    if isinstance(value, (list, tuple)):
        return next((found for i, v in enumerate(value) if (found := _large_tensor(v, f"{place}[{i}]", budget))), "")
    return ""


def _spelled(value: Any) -> Any:
    """The value with each tensor of a carried dtype in it as its case spelling, tuples as lists (as YAML writes
    them); the rest as it is."""
    if is_array(value):
        name = wire_name(value.dtype)
        if name is None:
            return value
        import numpy

        elements = value.astype(numpy.float64) if value.dtype.kind not in "biu" else value
        return _Flow(tensor=_Flow(dtype=name, shape=list(value.shape), values=elements.tolist()))
    if isinstance(value, dict) and not isinstance(value, _Flow):
        return {k: _spelled(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_spelled(v) for v in value]
    return value
