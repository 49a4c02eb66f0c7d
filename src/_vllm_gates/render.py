"""Render inputs and results for failure reports: YAML for plain data, a tensor as its dtype, shape and first
elements (issue 29), repr for anything else."""
from __future__ import annotations

from typing import Any

import yaml

from _vllm_gates.tensors import is_array, summary

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
    """A YAML snippet to paste under a gate's `cases:` to replay this input."""
    if not is_plain(data):
        return f"# input is not plain data and cannot be written as a case: {render_value(data)}"
    block = yaml.safe_dump({name: {"input": _listify(data)}}, default_flow_style=False, sort_keys=False, allow_unicode=True)
    return block.rstrip()
