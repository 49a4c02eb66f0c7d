"""Typed field readers over line-aware YAML that collect problems naming file:line:column, key and value."""
from __future__ import annotations

import re
from typing import Any

from _vllm_gates.base.errors import Location, Problem
from _vllm_gates.base.yamlsource import YList, YMap, location_of

TARGET_PATTERN = re.compile(r"^\.?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


_SHAPES = {
    TARGET_PATTERN.pattern: "a target written module:attribute, e.g. impl.worker.kv_budget:budget_for, or "
                            ".build:impl_call relative to the row folder",
    r"^[a-z0-9][a-z0-9-]*$": "an id of lowercase letters, digits and dashes (e.g. kv-page-size)",
    r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$": "a name of letters, digits and _ . + - (e.g. fp16-page)",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "a Python identifier (e.g. ValueError)",
}


def mismatch(value: str, pattern: re.Pattern[str]) -> str:
    """Why ``value`` is refused, in words rather than the regular expression that refused it."""
    shape = _SHAPES.get(pattern.pattern, f"text matching {pattern.pattern}")
    hint = " (no ':' between the module and the attribute)" if pattern is TARGET_PATTERN and ":" not in value else ""
    return f"value {show(value)} is not {shape}{hint}"


def show(value: Any) -> str:
    """A short rendering of a YAML value for error messages."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return type(value).__name__


class Reader:
    """Collects problems while reading one file; each problem names place, key path and value."""

    def __init__(self, path: str):
        self.path = path
        self.problems: list[Problem] = []

    def problem(self, where: Location | None, key: str, message: str, cause: str = "") -> None:
        self.problems.append(Problem(where or Location(self.path, 1, 1), key, message, cause))

    def mapping(self, value: Any, key: str, where: Location | None) -> YMap | None:
        if isinstance(value, YMap):
            return value
        self.problem(where, key, f"expected a mapping, got {type_name(value)} {show(value)}")
        return None

    def keys(self, mapping: YMap, key: str, required: set[str], optional: set[str]) -> None:
        for name in mapping:
            if name not in required and name not in optional:
                allowed = ", ".join(sorted(required | optional))
                self.problem(location_of(mapping, name), f"{key}.{name}" if key else str(name),
                             f"unknown key {show(name)} (allowed: {allowed})")
        if mapping.keys() >= required:  # every required key is there (told in C, without a set made)
            return
        for name in sorted(required - set(mapping)):
            self.problem(mapping.location, f"{key}.{name}" if key else name, "required key is missing")

    def string(self, mapping: YMap, name: str, key: str, pattern: re.Pattern[str] | None = None) -> str | None:
        if name not in mapping:
            return None
        value = mapping[name]
        where = location_of(mapping, name)
        if not isinstance(value, str) or not value.strip():
            self.problem(where, key, f"expected a non-empty string, got {type_name(value)} {show(value)}")
            return None
        if pattern is not None and not pattern.match(value):
            self.problem(where, key, mismatch(value, pattern))
            return None
        return value

    def string_list(self, mapping: YMap, name: str, key: str, pattern: re.Pattern[str] | None = None,
                    non_empty: bool = False) -> tuple[list[str], list[Location]]:
        if name not in mapping:
            return [], []
        value = mapping[name]
        where = location_of(mapping, name)
        if not isinstance(value, YList):
            self.problem(where, key, f"expected a list of strings, got {type_name(value)} {show(value)}")
            return [], []
        if non_empty and not value:
            self.problem(where, key, "must list at least one entry")
        out, places = [], []
        for index, item in enumerate(value):
            item_where = location_of(value, index)
            if not isinstance(item, str) or not item.strip():
                self.problem(item_where, f"{key}[{index}]", f"expected a non-empty string, got {type_name(item)} {show(item)}")
            elif pattern is not None and not pattern.match(item):
                self.problem(item_where, f"{key}[{index}]", mismatch(item, pattern))
            elif item in out:
                self.problem(item_where, f"{key}[{index}]", f"duplicate entry {show(item)}")
            else:
                out.append(item)
                places.append(item_where)
        return out, places

    def positive_int(self, mapping: YMap, name: str, key: str, default: int) -> int:
        if name not in mapping:
            return default
        value = mapping[name]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            self.problem(location_of(mapping, name), key, f"expected a positive integer, got {type_name(value)} {show(value)}")
            return default
        return value
