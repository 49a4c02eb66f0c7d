"""Plain data, the values workers and the judge exchange (docs/worker-protocol.md): exact built-in types as tagged JSON.
`encode`/`decode` convert to and from the JSON-ready form, `dumps`/`loads` to and from its UTF-8 text; format below."""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from itertools import chain
from typing import Any, NoReturn

from _vllm_gates.base.errors import GatesError
from _vllm_gates.wire import tensors
from _vllm_gates.wire.channel import MAX_BUFFER_BYTES, MAX_BUFFERS, ProtocolError

# The wire format, for writers in any language. JSON null, true/false, strings and arrays are None, bool, str and
# list. A JSON number without fraction or exponent is an int of any size up to 4300 digits (outside ±2^53 readers must
# parse it exactly, never through a double); one with a fraction or exponent is a finite float, written so it reads
# back as the same double (Python writes 1.0 as `1.0`, -0.0 as `-0.0`). A JSON object is exactly one of four tags:
# {"$float": "nan" | "inf" | "-inf"}, {"$tuple": [items]}, {"$map": [[key, value], ...]} (insertion order; a key is
# null, a bool, a number, a string, a $float or a $tuple of keys) and {"$wrong": true}, a result equal to nothing.
# A fifth, {"$tensor": {"dtype": D, "shape": [...], "buffer": i}}, is a tensor whose elements are the frame's buffer i
# (tensors.py; never a map key): numpy arrays and torch tensors encode to it, it decodes to a numpy array.
# Strings are valid Unicode (no lone surrogates); object keys are never repeated; nothing nests deeper than 200
# lists, tuples and maps.
#
# Maps decode to dicts. Python merges keys that are equal as numbers (1, 1.0 and True; 0.0 and -0.0; tuples of
# these), so no dict can hold a $map with two such keys: decoding refuses it (MapKeyCollision, a ProtocolError), and
# `encode` never writes one. Each NaN is a key of its own, as in Python.

__all__ = ["WRONG", "WrongEverywhere", "MAX_DEPTH", "MAX_INT_DIGITS", "NotPlain", "ProtocolError", "MapKeyCollision",
           "encode", "decode", "dumps", "loads"]


class WrongEverywhere:
    """What the audit's stand-in returns: a value equal to nothing, not even itself."""

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "<wrong-everywhere stand-in result>"


WRONG = WrongEverywhere()  # what {"$wrong": true} decodes to
MAX_DEPTH = 200  # lists, tuples and maps nested in one another
MAX_INT_DIGITS = 4300  # Python's default limit on int <-> decimal text
_INT_BOUND = 10 ** MAX_INT_DIGITS
_SMALL_INT = 1 << 63
_FLOAT_TAGS = ("nan", "inf", "-inf")
_TAGS = ("$float", "$tuple", "$map", "$wrong", "$tensor")

# A path into a value, built only when an error is reported: None is the root, else (parent, step) where a step is
# an int (a list or tuple index), ("key", i) (the i-th key of a map) or ("value", key) (the value of a plain key).
Path = tuple[Any, Any] | None


class NotPlain(GatesError):
    """A value the protocol cannot carry: a type that is not exactly a plain one, a cycle, or nesting too deep."""

    def __init__(self, type_path: str, where: str, why: str = "", root: str = "result"):
        self.type_path, self.where, self.why = type_path, where, why
        what = f"{type_path} {why}" if why else type_path
        super().__init__(f"{root} is not plain data: {what} at {where}")


class MapKeyCollision(ProtocolError):
    """A $map whose keys Python's dict would merge (1 and True, 1 and 1.0, 0.0 and -0.0): no dict can hold it."""


def type_path(value: Any) -> str:
    """`module.qualname` of the value's type (just the qualname for builtins), read without running the type's code."""
    cls = type(value)
    qualname = type.__dict__["__qualname__"].__get__(cls)  # the slot, past any metaclass __getattribute__
    module = type.__dict__["__module__"].__get__(cls)
    if type(module) is not str:
        module = "?"
    return qualname if module == "builtins" else f"{module}.{qualname}"


def _key_text(key: Any) -> str:
    """A plain key as written in a path: strings in JSON quotes, tuples as Python writes them."""
    if type(key) is str:
        return json.dumps(key, ensure_ascii=False)
    if type(key) is tuple:
        items = ", ".join(_key_text(k) for k in key)
        return f"({items},)" if len(key) == 1 else f"({items})"
    return repr(key)  # None, bool, int, float: exact built-ins, their repr runs no foreign code


def where(path: Path, root: str = "result") -> str:
    """The path as text: result[2]["key"], or result[2].<key 0>[1] inside the first key of a map."""
    steps = []
    while path is not None:
        path, step = path
        steps.append(step)
    text = root
    for step in reversed(steps):
        if type(step) is int:
            text += f"[{step}]"
        elif step[0] == "key":
            text += f".<key {step[1]}>"
        else:
            text += f"[{_key_text(step[1])}]"
    return text


def _str_ok(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _int_rows(items: list[Any]) -> bool:
    """Exact ints within the digit limit, or lists of them (a layout's rows): the common case, checked in C."""
    kinds = set(map(type, items))
    if kinds == {list}:
        items = list(chain.from_iterable(items))
        kinds = set(map(type, items))
    return kinds <= {int} and (not items or (min(items) > -_INT_BOUND and max(items) < _INT_BOUND))


def _copy_rows(items: list[Any]) -> list[Any]:
    return [list(row) for row in items] if items and type(items[0]) is list else list(items)


class _Irregular(Exception):  # control flow between two passes, not an error kind: no GatesError
    """The fast pass met something it does not handle: the careful pass decides (and names the place)."""


_FLAT = frozenset({int, str, bool, float, type(None)})  # kinds that JSON writes as they are, once checked below
_NESTED = frozenset({list, tuple, dict})


def _flat_ok(items: Any, kinds: set[type]) -> bool:
    """The flat items JSON could still refuse or misread: huge ints, non-finite floats, lone surrogates."""
    if int in kinds:
        ints = [x for x in items if type(x) is int] if len(kinds) > 1 else items
        if ints and not (min(ints) > -_INT_BOUND and max(ints) < _INT_BOUND):
            return False
    if float in kinds and not all(math.isfinite(x) for x in items if type(x) is float):
        return False
    return str not in kinds or all(_str_ok(x) for x in items if type(x) is str)


def _fast_encode(value: Any, depth: int) -> Any:
    """Encode without building paths: lists of flat kinds pass as they are, their types checked in C."""
    kind = type(value)
    if depth >= MAX_DEPTH:
        raise _Irregular()
    if kind is dict:
        pairs = list(value.items())
        flat = [x for pair in pairs for x in pair]
        kinds = set(map(type, flat))
        if not kinds <= _FLAT | _NESTED or not _flat_ok(flat, kinds):
            raise _Irregular()
        return {"$map": [[_fast_encode(k, depth + 1) if type(k) in _NESTED else k,
                          _fast_encode(v, depth + 1) if type(v) in _NESTED else v] for k, v in pairs]}
    kinds = set(map(type, value))
    if not kinds <= _FLAT | _NESTED or not _flat_ok(value, kinds):
        raise _Irregular()
    if kinds <= _FLAT:
        items = value if kind is list else list(value)
    else:
        items = [_fast_encode(item, depth + 1) if type(item) in _NESTED else item for item in value]
    return items if kind is list else {"$tuple": items}


def _json_native(data: list[Any], flat_checked: bool = False) -> bool:
    """Lists of lists of flat values, checked level by level in C: JSON writes and reads them as they are.

    ``flat_checked``: the flat values came from a parser that refuses what `_flat_ok` looks for (orjson)."""
    level, depth = [data], 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            return False
        items = list(chain.from_iterable(level))
        kinds = set(map(type, items))
        if not kinds <= _FLAT | {list}:
            return False
        if list not in kinds:
            return flat_checked or _flat_ok(items, kinds)
        if not flat_checked and not _flat_ok([x for x in items if type(x) is not list], kinds - {list}):
            return False
        level = [x for x in items if type(x) is list]
    return True


def encode(value: Any, root: str = "result", cap: int = MAX_BUFFER_BYTES) -> Any:
    """The JSON-ready form of a plain value; NotPlain for anything else (``root`` names the value in messages).
    Tensors become channel.OutOfBand values (their bytes a frame's buffers), at most ``cap`` bytes of them in all.

    A fast pass handles the common case; anything it does not (and every refusal) goes through the careful pass.
    """
    kind = type(value)
    if kind is int and -_SMALL_INT < value < _SMALL_INT or kind is str and value.isascii() or kind is bool or value is None:
        return value  # the common flat results, as they are
    if type(value) is list and _json_native(value):
        return value
    if type(value) in _NESTED:
        try:
            return _fast_encode(value, 0)
        except (_Irregular, RecursionError):
            pass
    return _Encoder(root, cap).encode(value, None, 0)


class _Encoder:
    def __init__(self, root: str, cap: int = MAX_BUFFER_BYTES):
        self.root, self.cap = root, cap
        self.active: set[int] = set()  # ids of the containers on the path being encoded
        self.tensors = self.tensor_bytes = 0  # tensors met so far, and their bytes

    def refuse(self, value: Any, path: Path, why: str = "") -> NoReturn:
        raise NotPlain(type_path(value), where(path, self.root), why, self.root)

    def encode(self, value: Any, path: Path, depth: int) -> Any:
        kind = type(value)
        if value is None or kind is bool:
            return value
        if kind is int:
            if value.bit_length() > 14000 and abs(value) >= _INT_BOUND:
                self.refuse(value, path, f"with more than {MAX_INT_DIGITS} digits")
            return value
        if kind is float:
            if math.isfinite(value):
                return value
            return {"$float": "nan" if value != value else ("inf" if value > 0 else "-inf")}
        if kind is str:
            return value if _str_ok(value) else self.refuse(value, path, "with a lone surrogate")
        if kind is WrongEverywhere:
            return {"$wrong": True}
        if kind is not list and kind is not tuple and kind is not dict:
            return self.tensor(value, path) if tensors.carried(value) else self.refuse(value, path)
        if depth >= MAX_DEPTH:
            self.refuse(value, path, f"nested deeper than {MAX_DEPTH} levels")
        if kind is list and depth + 1 < MAX_DEPTH and _int_rows(value):
            return _copy_rows(value)
        if id(value) in self.active:
            self.refuse(value, path, "that contains itself")
        self.active.add(id(value))
        try:
            if kind is dict:
                return {"$map": [[self.encode(k, (path, ("key", i)), depth + 1), self.encode(v, (path, ("value", k)), depth + 1)]
                                 for i, (k, v) in enumerate(value.items())]}
            items = [self.encode(item, (path, i), depth + 1) for i, item in enumerate(value)]
            return items if kind is list else {"$tuple": items}
        finally:
            self.active.discard(id(value))

    def tensor(self, value: Any, path: Path) -> tensors.WireTensor:
        """A numpy array or torch tensor as a `$tensor` to be (its bytes within the cap, its count within MAX_BUFFERS)."""
        def refuse(why: str) -> NoReturn:
            self.refuse(value, path, why)

        self.tensors += 1
        if self.tensors > MAX_BUFFERS:
            refuse(f"(tensor {self.tensors} of this value, past the limit of {MAX_BUFFERS} per message)")
        wire = tensors.to_wire(value, refuse, self.cap, self.tensor_bytes)
        self.tensor_bytes += wire.data.nbytes
        return wire


_JSON_FLAT = frozenset({int, str, bool, float, type(None)})


def decode(data: Any, root: str = "result", flat_checked: bool = False, buffers: Sequence[bytearray] = (),
           writable: bool = False, cap: int = MAX_BUFFER_BYTES) -> Any:
    """The plain value a JSON-ready structure encodes; ProtocolError for anything the wire format does not allow.

    ``flat_checked``: ``data`` came from orjson: no non-finite float, no lone surrogate, no int past 64 bits.
    ``buffers``: the frame's, each to be taken by exactly one `$tensor`, which decodes to a numpy array (read-only
    unless ``writable``: the judge's are read-only, a worker's inputs writable)."""
    if not buffers:
        if type(data) is list and _json_native(data, flat_checked):
            return data
        if type(data) is dict and len(data) == 1 and "$map" in data:
            found = _flat_map(data["$map"])
            if found is not None:
                return found
    decoder = _Decoder(root, buffers, writable, cap)
    value = decoder.decode(data, None, 0, False)
    unused = [i for i in range(len(buffers)) if i not in decoder.used]
    if unused:
        raise ProtocolError(f"{root} is not plain data: the frame's buffer {unused[0]} is used by no $tensor "
                            f"({len(unused)} of its {len(buffers)} buffers are unused)")
    return value


def _flat_map(pairs: Any) -> dict[str, Any] | None:
    """A $map whose keys are distinct strings and whose values are flat (a call's keyword input): checked in C;
    None for anything else, which the careful pass decodes (and names the place of a refusal)."""
    if type(pairs) is not list or not all(type(pair) is list and len(pair) == 2 for pair in pairs):
        return None
    keys, values = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    kinds = set(map(type, values))
    if not set(map(type, keys)) <= {str} or not kinds <= _JSON_FLAT or len(set(keys)) != len(keys):
        return None
    if not _flat_ok(keys, {str}) or not _flat_ok(values, kinds):
        return None
    return dict(zip(keys, values, strict=True))


class _Decoder:
    def __init__(self, root: str, buffers: Sequence[bytearray] = (), writable: bool = False, cap: int = MAX_BUFFER_BYTES):
        self.root, self.buffers, self.writable, self.cap = root, buffers, writable, cap
        self.used: set[int] = set()  # the buffers `$tensor`s took

    def refuse(self, path: Path, message: str, error: type[ProtocolError] = ProtocolError) -> NoReturn:
        raise error(f"{self.root} is not plain data: {message} at {where(path, self.root)}")

    def decode(self, data: Any, path: Path, depth: int, key: bool) -> Any:
        kind = type(data)
        if data is None or kind is bool:
            return data
        if kind is int:
            if data.bit_length() > 14000 and abs(data) >= _INT_BOUND:
                self.refuse(path, f"an int with more than {MAX_INT_DIGITS} digits")
            return data
        if kind is float:
            return data if math.isfinite(data) else self.refuse(path, "a bare non-finite float (JSON has none; $float tags them)")
        if kind is str:
            return data if _str_ok(data) else self.refuse(path, "a string with a lone surrogate")
        if kind is list:
            if key:
                self.refuse(path, "a list as a map key")
            self.check_depth(path, depth)
            if depth + 1 < MAX_DEPTH and _int_rows(data):
                return _copy_rows(data)
            return [self.decode(item, (path, i), depth + 1, False) for i, item in enumerate(data)]
        if kind is dict:
            return self.tagged(data, path, depth, key)
        self.refuse(path, f"a {type_path(data)}, which JSON does not have")

    def check_depth(self, path: Path, depth: int) -> None:
        if depth >= MAX_DEPTH:
            self.refuse(path, f"nesting deeper than {MAX_DEPTH} levels")

    def tagged(self, data: dict[Any, Any], path: Path, depth: int, key: bool) -> Any:
        tag = next(iter(data)) if len(data) == 1 else None
        if type(tag) is not str or tag not in _TAGS:
            found = ", ".join(_key_text(k)[:40] if type(k) is str else type_path(k) for k in list(data)[:5])
            self.refuse(path, f"an object with keys [{found}{', ...' if len(data) > 5 else ''}], "
                              f"not one of the tags {', '.join(_TAGS)}")
        body = data[tag]
        if tag == "$float":
            if type(body) is not str or body not in _FLOAT_TAGS:
                self.refuse(path, f'$float of {_found(body)}, not "nan", "inf" or "-inf"')
            return float(body)  # a fresh NaN each time: NaN keys stay distinct, as in Python
        if tag == "$wrong":
            if body is not True or key:
                self.refuse(path, "$wrong as a map key" if key else f"$wrong of {_found(body)}, not true")
            return WRONG
        if tag == "$tensor":
            if key:
                self.refuse(path, "a $tensor as a map key")
            return tensors.from_wire(body, self.buffers, self.used, self.writable, self.cap,
                                     lambda message: self.refuse(path, message))
        if type(body) is not list:
            self.refuse(path, f"{tag} of {_found(body)}, not an array")
        if tag == "$map" and key:
            self.refuse(path, "a $map as a map key")
        self.check_depth(path, depth)
        if tag == "$tuple":
            return tuple(self.decode(item, (path, i), depth + 1, key) for i, item in enumerate(body))
        return self.mapping(body, path, depth)

    def mapping(self, pairs: list[Any], path: Path, depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for i, pair in enumerate(pairs):
            if type(pair) is not list or len(pair) != 2:
                self.refuse((path, ("key", i)), f"a $map entry that is {_found(pair)}, not a [key, value] array")
            k = self.decode(pair[0], (path, ("key", i)), depth + 1, True)
            if k in out:
                first = next(x for x in out if x == k)
                self.refuse((path, ("key", i)), f"key {_key_text(k)} collides with the key {_key_text(first)} "
                                                f"(a Python dict merges them)", MapKeyCollision)
            out[k] = self.decode(pair[1], (path, ("value", k)), depth + 1, False)
        return out


def _found(data: Any) -> str:
    """What a wire value is, for a message: its JSON kind, never its (possibly huge) text."""
    names = {type(None): "null", bool: "a bool", int: "a number", float: "a number", str: "a string",
             list: "an array", dict: "an object"}
    return names.get(type(data), type_path(data))


def dumps(value: Any, root: str = "result") -> bytes:
    """UTF-8 JSON text of a plain value, compact."""
    return json.dumps(encode(value, root), allow_nan=False, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def loads(text: bytes, root: str = "result") -> Any:
    """The plain value of UTF-8 JSON text; ProtocolError for text or values the wire format does not allow."""
    try:
        data = json.loads(text.decode("utf-8"), parse_constant=_refuse_constant, parse_float=float, parse_int=int,
                          object_pairs_hook=_object)
    except ProtocolError:
        raise
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"{root} is not UTF-8 JSON: {type(exc).__name__}: {exc}") from None
    return decode(data, root)


def _refuse_constant(token: str) -> NoReturn:
    raise ProtocolError(f"{token} is not JSON (non-finite floats are tagged with $float)")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        raise ProtocolError(f"a JSON object repeats a key: {', '.join(_key_text(k) for k, _ in pairs)}"[:300])
    return data
