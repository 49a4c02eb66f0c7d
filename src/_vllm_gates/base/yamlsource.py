"""Line-aware, safe YAML loading: every mapping, sequence and key remembers its file:line:column.

Definition files are read within limits checked before and while reading, never after a whole document is built:
only regular files are opened (a FIFO or a device would block or never end), a file's size is checked from stat
before reading (MAX_FILE_BYTES), and the YAML node count and nesting are checked node by node while the document
is composed (MAX_NODES, MAX_DEPTH). Expanding aliases is bounded again when the document is built (an alias bomb is
a small node graph that expands to a huge one).
"""
from __future__ import annotations

import gc
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, overload

import yaml
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)

from _vllm_gates.base.errors import DefinitionError, Location, Problem

MAX_FILE_BYTES = 8 * 1024 * 1024  # a definition file (gate file, roadmap, spec, pyproject.toml) larger than this is refused
MAX_NODES = 1_500_000  # YAML nodes composed in one file, and values built from them once aliases are expanded:
# a gate file of 100,000 cases (about ten nodes each) loads; the slowest path, the pure-Python one that words an error,
# peaks near 0.7 GB on such a file (measured: 100,000 cases with a duplicate key at the end, 17 s)
MAX_DEPTH = 64  # nesting levels below the document's top node


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


def _mark(path: str, mark: Any) -> Location:
    return Location(path, mark.line + 1, mark.column + 1) if mark is not None else Location(path, 1, 1)


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit % (1024 * 1024) == 0 else f"{limit} bytes"


def _too_many_nodes(where: Location) -> DefinitionError:
    return DefinitionError([Problem(where, "", f"more than {MAX_NODES} YAML nodes: over the limit on the nodes of a "
                                               "definition file (counted while reading; the rest of the file is not read)")])


def _too_deep(where: Location) -> DefinitionError:
    return DefinitionError([Problem(where, "", f"nesting deeper than {MAX_DEPTH} levels")])


# reading files within limits ---------------------------------------------------------------------------------------

def file_kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"


def refuse_unreadable(info: os.stat_result, where: Location, what: str, limit: int = MAX_FILE_BYTES) -> None:
    """DefinitionError when ``info`` is not a regular file, or is larger than ``limit`` bytes."""
    if not stat.S_ISREG(info.st_mode):
        raise DefinitionError([Problem(where, "", f"{what} is {file_kind(info.st_mode)}, not a regular file: refused without opening it")])
    if info.st_size > limit:
        raise DefinitionError([Problem(where, "", f"{what} is {info.st_size} bytes: over the {_size(limit)} limit on a {what} "
                                                  "(checked from its size before reading)")])


def read_definition_text(path: Path | str, shown: str, what: str = "definition file", limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes; DefinitionError at ``shown``:1:1 otherwise.

    The file is stat-ed before it is opened (a FIFO or a device is never opened), opened without blocking, checked
    again on the open descriptor (it may have been replaced meanwhile), and read no further than the limit.
    """
    where = Location(shown, 1, 1)
    try:
        refuse_unreadable(os.stat(path), where, what, limit)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
        fd = os.open(path, flags)
        try:
            refuse_unreadable(os.fstat(fd), where, what, limit)
            chunks, left = [], limit + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            data = b"".join(chunks)
        finally:
            os.close(fd)
    except (OSError, ValueError) as exc:
        raise DefinitionError([Problem(where, "", f"cannot read file: {exc}")]) from None
    if len(data) > limit:  # it grew after the size was checked
        raise DefinitionError([Problem(where, "", f"{what} is over the {_size(limit)} limit on a {what} (read up to the limit)")])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DefinitionError([Problem(where, "", f"cannot read file: {exc}")]) from None


# composing within limits -------------------------------------------------------------------------------------------

class _ResolvedOnce:
    """A scalar's implicit tag (int, float, bool, null or str) depends only on its text and how it was written
    (the safe resolver has no path resolvers): each is found by regular expression once, then remembered."""

    _scalar_tags: dict[tuple[str, tuple[bool, bool]], str] = {}

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is not yaml.ScalarNode:
            return super().resolve(kind, value, implicit)  # type: ignore[misc]
        key = (value, tuple(implicit))
        tag = self._scalar_tags.get(key)
        if tag is None:
            tag = self._scalar_tags[key] = super().resolve(kind, value, implicit)  # type: ignore[misc]
            if len(self._scalar_tags) > 200_000:
                self._scalar_tags.clear()
        return tag


class _Builder(_ResolvedOnce, yaml.SafeLoader):
    """SafeLoader used only to compose nodes and construct plain scalars.

    It counts nodes and nesting as they are composed and refuses the document at the node that passes a limit,
    before the rest of the file is read: get_single_node() would otherwise build the whole node graph first.
    """

    def __init__(self, stream: str, shown: str = "<string>"):
        super().__init__(stream)
        self.shown, self.nodes, self.depth = shown, 0, 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.nodes += 1
        self.depth += 1
        try:
            if self.nodes > MAX_NODES:
                raise _too_many_nodes(_mark(self.shown, self.peek_event().start_mark))
            if self.depth > MAX_DEPTH + 1:
                raise _too_deep(_mark(self.shown, self.peek_event().start_mark))
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _precount(text: str, shown: str) -> bool:
    """With libyaml, count the nodes of ``text`` from its event stream first: a file with too many is refused in a
    fraction of the time the pure-Python scanner takes to reach the limit (about 2 s per 100 000 nodes).

    Only a refusal is taken from here; anything else (a syntax error, nesting too deep) stops the count and is left
    to the pure-Python loader, which words the errors and counts again. True when the whole stream was read within
    the limits (libyaml may then compose it: _compose_with_libyaml).
    """
    try:
        from yaml.cyaml import CParser  # type: ignore[attr-defined]  # the stubs re-export it from yaml._yaml implicitly
    except ImportError:  # PyYAML built without libyaml: the pure-Python count alone
        return False
    parser = CParser(text)
    nodes = depth = 0
    try:
        while True:
            event = parser.get_event()
            if isinstance(event, (ScalarEvent, AliasEvent, CollectionStartEvent)):
                nodes += 1
                if nodes > MAX_NODES:
                    raise _too_many_nodes(_mark(shown, event.start_mark))
                if isinstance(event, CollectionStartEvent):
                    depth += 1
                    if depth > MAX_DEPTH:
                        return False
            elif isinstance(event, CollectionEndEvent):
                depth -= 1
            elif isinstance(event, StreamEndEvent):
                return True
    except yaml.YAMLError:
        return False
    finally:
        parser.dispose()


try:
    from yaml.cyaml import CParser as _CParser  # type: ignore[attr-defined]  # the stubs re-export it from yaml._yaml implicitly

    class _LibyamlComposer(_ResolvedOnce, _CParser, yaml.resolver.Resolver):  # CParser resolves tags through the Python resolver
        """libyaml's composer, for _compose_with_libyaml."""
except ImportError:  # PyYAML built without libyaml
    _CParser = None  # type: ignore[assignment,misc]
    _LibyamlComposer = None  # type: ignore[assignment,misc]


# where libyaml and the pure-Python loader part ways: tabs and a block scalar's header run into a comment (`|#`),
# which libyaml accepts and the Python scanner refuses; tags (`!` alone); a byte-order mark inside the text (columns);
# the line breaks besides \n
_LIBYAML_DIFFERS = re.compile("[\t!\ufeff\r\x85\u2028\u2029]|[|>][-+0-9]*#")
_BLOCK_HEADER_COMMENT = re.compile("[|>][-+0-9]*#")


def _libyaml_differs(text: str) -> bool:
    """``_LIBYAML_DIFFERS.search(text)``, told faster: each character looked for on its own (a scan in C), and the
    block-header pattern searched only in a text that holds both a `#` and a `|` or `>`."""
    return ("\t" in text or "!" in text or "\ufeff" in text or "\r" in text or "\x85" in text or "\u2028" in text
            or "\u2029" in text or ("#" in text and ("|" in text or ">" in text) and _BLOCK_HEADER_COMMENT.search(text) is not None))


def _printable(text: str) -> bool:
    """Whether the pure-Python reader accepts every character of ``text`` (it refuses control characters before any
    parsing): printable ASCII and line breaks are told by str methods, anything else by the reader's own pattern."""
    if text.isascii() and text.replace("\n", " ").isprintable():
        return True
    return yaml.reader.Reader.NON_PRINTABLE.search(text) is None


def _compose_with_libyaml(text: str) -> yaml.Node | None:
    """The node graph of a document _precount read within the limits, composed by libyaml: the same nodes, tags and
    marks as the pure-Python composer, about ten times faster (`gates list` reads every gate file). None when
    libyaml is missing, the text holds what the two loaders read differently (_LIBYAML_DIFFERS), or libyaml refuses
    the document: the pure-Python composer then reads it, and words any error."""
    if _LibyamlComposer is None or _libyaml_differs(text):
        return None
    parser = _LibyamlComposer(text)
    try:
        return parser.get_single_node()
    except yaml.YAMLError:
        return None
    finally:
        parser.dispose()


_FALLBACK = object()  # _build_with_libyaml: this document is left to the node-by-node path
_MISSING = object()
# the text of a scalar without a tag -> its value (immutable: a str, an int, a float, a bool, None, a date), as the
# safe resolver and constructor give it: for plain scalars, and for the others (quoted, literal, folded)
_PLAIN_VALUES: dict[str, Any] = {}
_QUOTED_VALUES: dict[str, Any] = {}
# a Location (a frozen dataclass of three fields) may be made by setting its fields through its __dict__: half the cost
_PLAIN_LOCATIONS = not hasattr(Location, "__slots__") and not hasattr(Location, "__post_init__")


_SCALAR_TAGS = ("tag:yaml.org,2002:null", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
                "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:str")
_SCALAR_CONSTRUCTORS = {tag: _Builder.yaml_constructors[tag] for tag in _SCALAR_TAGS}  # each reads only its node
_SCALARS = _Builder("", "<scalars>")  # resolves an implicit tag, and holds no state for it (no path resolvers)


def _new_scalar(event: ScalarEvent, loader_of: Callable[[], _Builder]) -> Any:
    """The value of a scalar event not met before, as the safe loader resolves and constructs it (a tag the
    implicit resolvers give, through its constructor; any other through ``loader_of()``); _FALLBACK for a merge key
    or a value its tag cannot hold (the node-by-node path words it)."""
    tag = _SCALARS.resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag == "tag:yaml.org,2002:merge":
        return _FALLBACK
    node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)  # type: ignore[arg-type]  # libyaml's Mark is its own class, the same fields
    constructor = _SCALAR_CONSTRUCTORS.get(tag)
    try:
        return constructor(_SCALARS, node) if constructor is not None else loader_of().construct_object(node)
    except Exception:  # worded by the node-by-node path
        return _FALLBACK


def _build_with_libyaml(text: str, shown: str, loader_of: Callable[[], _Builder]) -> Any:  # noqa: C901 (one loop over libyaml's events in one frame: the hot path of reading every gate file)
    """The document's value built straight from libyaml's event stream: the same YMaps, YLists, scalars and
    locations as composing the node graph and converting it (_compose_with_libyaml, then _convert), without the
    graph in between (`gates list` reads every gate file; at 10,000 cases the graph was most of its time).

    Only a plain document is built here: no anchors, aliases or tags, every mapping key a scalar that occurs once
    in its mapping and is no merge key, within the nesting limit, every scalar constructed without error. On
    anything else it returns _FALLBACK, and the node-by-node path reads the file again and words what is wrong.
    More than MAX_NODES nodes is refused here as _precount refuses it (the same events, counted the same way).
    ``loader_of`` gives the loader that resolves and constructs a scalar not met before.
    """
    if _CParser is None or _libyaml_differs(text):
        return _FALLBACK
    parser = _CParser(text)
    get = parser.get_event
    plain_values, quoted_values = _PLAIN_VALUES, _QUOTED_VALUES
    plain_locations, new_location = _PLAIN_LOCATIONS, Location.__new__
    nodes, limit, deepest = 0, MAX_NODES, MAX_DEPTH
    stack: list[tuple[Any, bool, Any]] = []  # the enclosing open collections, innermost last
    top: Any = _MISSING
    container: Any = None  # the innermost open collection; None at the top
    places: Any = None  # its key_locations (a mapping) or item_locations (a sequence)
    is_map = False
    key: Any = _MISSING  # in a mapping, the key whose value comes next; _MISSING when a key comes next
    key_where: Any = None
    event: Any  # one of libyaml's events, told apart by `type(event) is ...` (exact and fast; mypy narrows no alias of it)
    opened: Any  # the new collection's key_locations or item_locations
    try:
        if type(get()) is not StreamStartEvent or type(get()) is not DocumentStartEvent:
            return _FALLBACK  # an empty stream
        while True:
            event = get()
            kind = type(event)
            if kind is ScalarEvent:
                nodes += 1
                if nodes > limit:
                    raise _too_many_nodes(_mark(shown, event.start_mark))
                if event.anchor is not None or event.tag is not None:
                    return _FALLBACK
                # the safe resolver reads only implicit[0] (plain: its implicit resolvers; else str), so it keys the table
                scalar, values = event.value, plain_values if event.implicit[0] else quoted_values
                value = values.get(scalar, _MISSING)
                if value is _MISSING:
                    value = _new_scalar(event, loader_of)
                    if value is _FALLBACK:
                        return _FALLBACK
                    if len(values) >= 200_000:
                        values.clear()
                    values[scalar] = value
                if is_map:
                    if key is _MISSING:  # a key
                        if value in container:
                            return _FALLBACK
                        key = value
                        mark = event.start_mark
                        if plain_locations:
                            key_where = new_location(Location)
                            fields = key_where.__dict__
                            fields["path"], fields["line"], fields["column"] = shown, mark.line + 1, mark.column + 1
                        else:
                            key_where = Location(shown, mark.line + 1, mark.column + 1)
                    else:  # a mapping's scalar value has no location of its own
                        container[key] = value
                        places[key] = key_where
                        key = _MISSING
                    continue
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                container, is_map, places = stack.pop()
                continue
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                nodes += 1
                if nodes > limit:
                    raise _too_many_nodes(_mark(shown, event.start_mark))
                if event.anchor is not None or event.tag is not None or (is_map and key is _MISSING) or len(stack) >= deepest:
                    return _FALLBACK  # an anchor or a tag; a collection as a key; nesting past the limit
            elif kind is DocumentEndEvent and top is not _MISSING and type(get()) is StreamEndEvent:
                return top
            else:
                return _FALLBACK  # a second document, or an event not expected here
            mark = event.start_mark
            if plain_locations:
                where = new_location(Location)
                fields = where.__dict__
                fields["path"], fields["line"], fields["column"] = shown, mark.line + 1, mark.column + 1
            else:
                where = Location(shown, mark.line + 1, mark.column + 1)
            if kind is MappingStartEvent:
                value = YMap()
                value.location = where
                value.key_locations = opened = {}
            elif kind is SequenceStartEvent:
                value = YList()
                value.location = where
                value.item_locations = opened = []
            if container is None:
                top = value
            elif is_map:
                container[key] = value
                places[key] = key_where
                key = _MISSING
            else:
                container.append(value)
                places.append(where)
            if kind is not ScalarEvent:
                stack.append((container, is_map, places))
                container, is_map, places = value, kind is MappingStartEvent, opened
    except yaml.YAMLError:
        return _FALLBACK
    finally:
        parser.dispose()


def _convert(path: str, node: yaml.Node, loader: _Builder, depth: int = 0, budget: list[int] | None = None) -> Any:
    budget = budget if budget is not None else [MAX_NODES]
    budget[0] -= 1
    if budget[0] < 0:  # the composed graph is within MAX_NODES: only aliases make it larger
        raise DefinitionError([Problem(_loc(path, node), "", f"more than {MAX_NODES} YAML values once aliases are expanded "
                                                             "(alias expansion: an anchor repeated through aliases)")])
    if depth > MAX_DEPTH:
        raise _too_deep(_loc(path, node))
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
                first = next((k for k in out if k == key), key)  # NaN keys are never equal: still a duplicate
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


def load_yaml(path: Path | str, display_path: str | None = None, text: str | None = None,
              what: str = "YAML definition file") -> Any:
    """Parse one YAML document safely; raise DefinitionError naming file:line:column on any problem.

    ``what`` names the file in a refusal ("gate file", "roadmap"). The file must be a regular file within
    MAX_FILE_BYTES; the document within MAX_NODES nodes and MAX_DEPTH levels (module docstring).
    """
    shown = display_path or str(path)
    if text is None:
        text = read_definition_text(path, shown, what)
    loaders = _Loaders(text, shown)
    if not _printable(text):
        loaders.first()  # the reader refuses control characters before any parsing: said here, as it says it
    collecting = gc.isenabled()
    gc.disable()  # the values built hold no cycles: the collector would only walk them, over and over, as they grow
    try:
        value = _build_with_libyaml(text, shown, loaders.get)
        if value is not _FALLBACK:
            return value
        loader = loaders.get()
        node = _compose_with_libyaml(text) if _precount(text, shown) else None
        if node is None:  # no libyaml, a limit passed, an error to word, or an empty file
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
        if collecting:
            gc.enable()
        loaders.dispose()


class _Loaders:
    """The one _Builder of a load_yaml call, made when first needed: a plain document built from libyaml's events
    whose scalars were all met before needs none."""

    def __init__(self, text: str, shown: str):
        self.text, self.shown = text, shown
        self.loader: _Builder | None = None

    def first(self) -> _Builder:
        """Make the loader; DefinitionError when its reader refuses the text (a control character)."""
        try:
            self.loader = _Builder(self.text, self.shown)
        except yaml.YAMLError as exc:  # the reader refuses control characters before any parsing
            raise DefinitionError([Problem(_mark_location(self.shown, exc, self.text), "", f"YAML error: {_one_line(exc)}")]) from None
        return self.loader

    def get(self) -> _Builder:
        return self.loader if self.loader is not None else self.first()

    def dispose(self) -> None:
        if self.loader is not None:
            self.loader.dispose()


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


def _scalar(path: str, node: yaml.Node, loader: _Builder) -> Any:
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
        return {k: to_plain(v) if isinstance(v, (dict, list)) else v for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) if isinstance(v, (dict, list)) else v for v in value]
    return value


@overload
def location_of(container: YMap | YList, key: Any = None) -> Location: ...
@overload
def location_of(container: Any, key: Any = None) -> Location | None: ...
def location_of(container: Any, key: Any = None) -> Location | None:
    """Location of a key of a YMap, an item of a YList, or the container itself (None: a value read from no file)."""
    if key is None:
        return getattr(container, "location", None)
    if isinstance(container, YMap):
        return container.key_locations.get(key, container.location)
    if isinstance(container, YList) and isinstance(key, int) and 0 <= key < len(container.item_locations):
        return container.item_locations[key]
    return getattr(container, "location", None)
