"""Line-aware, safe YAML loading: every mapping, sequence and key remembers its file:line:column."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from _vllm_gates.errors import DefinitionError, Location, Problem


class YMap(dict):
    """A YAML mapping with the location of itself and of each key."""

    location: Location
    key_locations: dict[str, Location]


class YList(list):
    """A YAML sequence with the location of itself and of each item."""

    location: Location
    item_locations: list[Location]


def _loc(path: str, node: yaml.Node) -> Location:
    return Location(path, node.start_mark.line + 1, node.start_mark.column + 1)


class _Builder(yaml.SafeLoader):
    """SafeLoader used only to compose nodes and construct plain scalars."""


_MAX_NODES = 200_000


def _convert(path: str, node: yaml.Node, loader: _Builder, depth: int = 0, budget: list[int] | None = None) -> Any:
    budget = budget if budget is not None else [_MAX_NODES]
    budget[0] -= 1
    if budget[0] < 0:
        raise DefinitionError([Problem(_loc(path, node), "", f"more than {_MAX_NODES} YAML nodes (alias expansion?)")])
    if depth > 64:
        raise DefinitionError([Problem(_loc(path, node), "", "nesting deeper than 64 levels")])
    if isinstance(node, yaml.MappingNode):
        out = YMap()
        out.location = _loc(path, node)
        out.key_locations = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise DefinitionError([Problem(_loc(path, key_node), "<<", "YAML merge keys are not supported")])
            if not isinstance(key_node, yaml.ScalarNode):
                raise DefinitionError([Problem(_loc(path, key_node), "", "mapping keys must be plain scalars")])
            key = _scalar(path, key_node, loader)  # kept as YAML typed it: `1:` is the int 1 in case data
            if key in out:
                first = next(k for k in out if k == key)
                what = "duplicate key" if repr(first) == repr(key) else f"key {key!r} collides with key {first!r} (equal as Python values)"
                raise DefinitionError([Problem(_loc(path, key_node), str(key), what)])
            out[key] = _convert(path, value_node, loader, depth + 1, budget)
            out.key_locations[key] = _loc(path, key_node)
        return out
    if isinstance(node, yaml.SequenceNode):
        out_list = YList(_convert(path, item, loader, depth + 1, budget) for item in node.value)
        out_list.location = _loc(path, node)
        out_list.item_locations = [_loc(path, item) for item in node.value]
        return out_list
    return _scalar(path, node, loader)


def load_yaml(path: Path | str, display_path: str | None = None, text: str | None = None) -> Any:
    """Parse one YAML document safely; raise DefinitionError naming file:line:column on any problem."""
    shown = display_path or str(path)
    if text is None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise DefinitionError([Problem(Location(shown, 1, 1), "", f"cannot read file: {exc}")]) from None
    try:
        loader = _Builder(text)
    except yaml.YAMLError as exc:  # the reader refuses control characters before any parsing
        raise DefinitionError([Problem(_mark_location(shown, exc, text), "", f"YAML error: {_one_line(exc)}")]) from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise DefinitionError([Problem(Location(shown, 1, 1), "", "the file is empty")])
        return _convert(shown, node, loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = " ".join(part for part in (exc.context, exc.problem) if part)
        raise DefinitionError([Problem(Location(shown, line, col), "", f"YAML syntax error: {what}")]) from None
    except yaml.YAMLError as exc:
        raise DefinitionError([Problem(_mark_location(shown, exc, text), "", f"YAML error: {_one_line(exc)}")]) from None
    except RecursionError:
        raise DefinitionError([Problem(Location(shown, 1, 1), "", "document nests too deeply")]) from None
    finally:
        loader.dispose()


def _mark_location(path: str, exc: BaseException, text: str = "") -> Location:
    """Where a YAML error points (marks, or the reader's character offset in ``text``), else the file's start."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return Location(path, mark.line + 1, mark.column + 1)
    position = getattr(exc, "position", None)
    if not isinstance(position, int):
        return Location(path, 1, 1)
    return Location(path, text.count("\n", 0, position) + 1, position - text.rfind("\n", 0, position))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _scalar(path: str, node: yaml.Node, loader: "_Builder") -> Any:
    """Construct a scalar; a value its tag cannot hold (`!!int abc`, `2020-13-45`) is a definition error here."""
    try:
        return loader.construct_object(node)
    except yaml.YAMLError:
        raise
    except (ValueError, TypeError, OverflowError) as exc:
        raise DefinitionError([Problem(_loc(path, node), "", f"value {node.value!r} cannot be read as {node.tag.rsplit(':', 1)[-1]}: {exc}")]) from None


def to_plain(value: Any) -> Any:
    """Strip location wrappers: plain dicts and lists for case data handed to builders."""
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    return value


def location_of(container: Any, key: Any = None) -> Location | None:
    """Location of a key of a YMap, an item of a YList, or the container itself."""
    if key is None:
        return getattr(container, "location", None)
    if isinstance(container, YMap):
        return container.key_locations.get(key, container.location)
    if isinstance(container, YList) and isinstance(key, int) and 0 <= key < len(container.item_locations):
        return container.item_locations[key]
    return getattr(container, "location", None)
