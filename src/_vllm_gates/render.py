"""Render inputs and results for failure reports: YAML for plain data, a tensor as its dtype, shape and first
elements (issue 29), repr for anything else."""
from __future__ import annotations

from typing import Any

import yaml

from _vllm_gates.tensors import is_array, summary, wire_name

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
    if all(a is b for a, b in zip(shown, value)):
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
