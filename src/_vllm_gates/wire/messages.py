"""The protocol's messages between the judge and its workers (docs/worker-protocol.md §3-§5), as types: one writer
(``to_wire``: the JSON object a frame carries, keys in the order the protocol has always sent them) and one reader
(``read``: the message a frame must be, or a ``ProtocolError`` naming the message, the field and its value).

A judged implementation's worker is untrusted: what it sends is read here before anything else looks at it, and a
malformed message is the worker's fault (the pool blames it, as for any protocol break).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from _vllm_gates.wire.channel import MAX_BUFFER_BYTES, PROTOCOL_VERSION, ProtocolError

_SHOWN = 200  # characters of a bad value a protocol error quotes


def _bad(op: str, name: str, what: str, value: Any) -> ProtocolError:
    return ProtocolError(f"a {op} message's {name!r} must be {what}, got {repr(value)[:_SHOWN]}")


def _field(data: Mapping[str, Any], op: str, name: str, kinds: tuple[type, ...], what: str, default: Any = ...) -> Any:
    """``data[name]`` when it is one of ``kinds`` (never a bool for a number); ``default`` where absent, if given."""
    if name not in data:
        if default is ...:
            raise ProtocolError(f"a {op} message lacks {name!r}: got keys {sorted(map(str, data))[:8]}")
        return default
    value = data[name]
    if type(value) not in kinds:
        raise _bad(op, name, what, value)
    return value


def _names(data: Mapping[str, Any], op: str, name: str, default: Any = ...) -> Any:
    value = _field(data, op, name, (list,), "a list of texts", default)
    if value is not None and value is not default and not all(type(v) is str for v in value):
        raise _bad(op, name, "a list of texts", value)
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class Hello:
    """The judge's first message to a worker: where the project is, what it may import, its role and settings."""

    root: str
    path: tuple[str, ...]
    allowed_roots: tuple[str, ...]
    role: str
    settings: Mapping[str, Any]
    max_buffer_bytes: int

    def to_wire(self) -> dict[str, Any]:
        return {"op": "hello", "version": PROTOCOL_VERSION, "root": self.root, "path": list(self.path),
                "allowed_roots": list(self.allowed_roots), "role": self.role, "settings": dict(self.settings),
                "max_buffer_bytes": self.max_buffer_bytes}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Hello:
        return cls(_field(data, "hello", "root", (str,), "a text"), _names(data, "hello", "path", ()),
                   _names(data, "hello", "allowed_roots"), _field(data, "hello", "role", (str,), "a text", ""),
                   _field(data, "hello", "settings", (dict,), "an object", {}),
                   _count(data, "hello", "max_buffer_bytes", MAX_BUFFER_BYTES))


def _count(data: Mapping[str, Any], op: str, name: str, default: Any = ...) -> Any:
    value = _field(data, op, name, (int,), "a count", default)
    if isinstance(value, int) and value < 0:
        raise _bad(op, name, "a count", value)
    return value


@dataclass(frozen=True)
class ServerHello:
    """The judge's first message to a fork server: the modules it imports once, before forking workers."""

    preload: tuple[str, ...]

    def to_wire(self) -> dict[str, Any]:
        return {"op": "hello", "version": PROTOCOL_VERSION, "preload": list(self.preload)}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ServerHello:
        return cls(_names(data, "hello", "preload", ()))


@dataclass(frozen=True)
class Ready:
    """A worker (or fork server) started: its protocol version and pid; an external worker's language and the
    operations it answers (None: it did not say)."""

    version: Any  # compared with PROTOCOL_VERSION by the pool, which names both when they differ
    pid: Any  # informational, as sent (docs/worker-protocol.md §4: the judge uses the pid it started)
    language: Any = None  # informational, as sent
    operations: tuple[str, ...] | None = None

    def to_wire(self) -> dict[str, Any]:
        data: dict[str, Any] = {"op": "ready", "version": self.version, "pid": self.pid}
        if self.language is not None:
            data["language"] = self.language
        if self.operations is not None:
            data["operations"] = list(self.operations)
        return data

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Ready:
        operations = data.get("operations")
        if operations is not None and not (type(operations) is list and all(type(o) is str for o in operations)):
            raise ProtocolError(f"`operations` in its ready is not a list of names: {str(operations)[:_SHOWN]}")
        return cls(data.get("version"), data.get("pid"), data.get("language"),
                   tuple(operations) if operations is not None else None)


@dataclass(frozen=True)
class Refused:
    """A worker that will not answer this judge (another protocol version, a bad hello): why."""

    reason: str

    def to_wire(self) -> dict[str, Any]:
        return {"op": "refused", "reason": self.reason}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Refused:
        return cls(str(data.get("reason", ""))[:500])


@dataclass(frozen=True)
class Fork:
    """Ask the fork server for one worker (its channel end and log travel as descriptors); a confined one gets its
    scratch folder and Landlock rules."""

    scratch: str | None = None
    rules: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"op": "fork", **({"scratch": self.scratch, "rules": self.rules} if self.scratch else {})}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Fork:
        return cls(_field(data, "fork", "scratch", (str, type(None)), "a folder", None),
                   _field(data, "fork", "rules", (str, type(None)), "a text", None))


@dataclass(frozen=True)
class Forked:
    """The fork server's answer: the new worker's pid."""

    pid: int

    def to_wire(self) -> dict[str, Any]:
        return {"op": "forked", "pid": self.pid}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Forked:
        return cls(_field(data, "forked", "pid", (int,), "a process id"))


@dataclass(frozen=True)
class StatusQuery:
    """Ask the fork server how a forked worker ended, waiting at most ``wait`` seconds."""

    pid: int
    wait: float = 10.0

    def to_wire(self) -> dict[str, Any]:
        return {"op": "status", "pid": self.pid, "wait": self.wait}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> StatusQuery:
        return cls(_field(data, "status", "pid", (int,), "a process id"),
                   float(_field(data, "status", "wait", (int, float), "seconds", 10.0)))


@dataclass(frozen=True)
class Status:
    """How a forked worker ended: its exit status or signal, neither while it runs; ``unknown``: not its child."""

    exit: int | None
    signal: int | None
    unknown: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {"op": "status", "exit": self.exit, "signal": self.signal, **({"unknown": True} if self.unknown else {})}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Status:
        return cls(_field(data, "status", "exit", (int, type(None)), "an exit status or null", None),
                   _field(data, "status", "signal", (int, type(None)), "a signal number or null", None),
                   _field(data, "status", "unknown", (bool,), "true or false", False))


@dataclass(frozen=True)
class Bye:
    """The judge is done with this worker."""

    def to_wire(self) -> dict[str, Any]:
        return {"op": "bye"}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Bye:
        return cls()


@dataclass(frozen=True)
class CallOperation:
    """Call a row's operation by name on an input (an external implementation's worker, or the Python one)."""

    operation: str
    input: Any  # plain.encode's wire form

    def to_wire(self) -> dict[str, Any]:
        return {"op": "call", "operation": self.operation, "input": self.input}


@dataclass(frozen=True)
class CallTarget:
    """Call a Python target (``module:attribute``), through its builder when the gate names one, on an input."""

    target: str
    anchor: str | None
    build: str | None
    build_anchor: str | None
    input: Any

    def to_wire(self) -> dict[str, Any]:
        return {"op": "call", "target": self.target, "anchor": self.anchor, "build": self.build,
                "build_anchor": self.build_anchor, "input": self.input}


@dataclass(frozen=True)
class ErrorBody:
    """A reply's `error`: its kind (an error kind of the implementation, or the worker's own), its message, and for
    an ambiguous call which side failed."""

    kind: str
    message: str = ""
    which: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The documented `{"kind", "message"}`, with `which` where a side is named (a build's definition error)."""
        return {"kind": self.kind, "message": self.message, **({"which": self.which} if self.which is not None else {})}

    @classmethod
    def from_wire(cls, data: Any) -> ErrorBody:
        """A reply's `error`: an object with a text `kind` (its message shown as text, whatever it is)."""
        if type(data) is not dict or type(data.get("kind")) is not str:
            raise ProtocolError(f"an error is an object with a text `kind`, got {str(data)[:_SHOWN]}")
        which = data.get("which")
        return cls(data["kind"], str(data.get("message", "")), which if isinstance(which, str) else None)


Message = Hello | ServerHello | Ready | Refused | Fork | Forked | StatusQuery | Status | Bye
M = TypeVar("M", Hello, ServerHello, Ready, Refused, Fork, Forked, StatusQuery, Status, Bye)
_OPS: dict[type, str] = {Hello: "hello", ServerHello: "hello", Ready: "ready", Refused: "refused", Fork: "fork",
                         Forked: "forked", StatusQuery: "status", Status: "status", Bye: "bye"}


@overload
def read(data: Any, expected: type[M], /) -> M: ...
@overload
def read(data: Any, *expected: type[Message]) -> Message: ...
def read(data: Any, *expected: type[Any]) -> Any:
    """``data`` as the first of ``expected`` whose op it carries; ProtocolError naming what was expected and got."""
    if type(data) is not dict:
        raise ProtocolError(f"a message is a JSON object, got {str(data)[:_SHOWN]}")
    op = data.get("op")
    for kind in expected:
        if op == _OPS[kind]:
            return kind.from_wire(data)
    wanted = " or ".join(dict.fromkeys(_OPS[kind] for kind in expected))
    raise ProtocolError(f"expected a {wanted} message, got op {str(op)[:40]!r}: {str(data)[:_SHOWN]}")


def to_wire(message: Message | CallOperation | CallTarget) -> dict[str, Any]:
    """The JSON object a frame carries for ``message``."""
    return message.to_wire()

