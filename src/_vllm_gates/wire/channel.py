"""Framing of the worker protocol (docs/worker-protocol.md §3): a 4-byte big-endian word, UTF-8 JSON, then buffers.

Bits 0-28 of the word are the JSON body's length; bit 31 says the body holds an integer outside the signed 64-bit
range, to be read exactly; bit 30 says binary buffers (a tensor's elements, docs/worker-protocol.md §3.1) follow the body; bit 29 is
reserved and refused. A buffered frame's buffers are read straight into preallocated bytearrays and written from
memoryviews: a 256 MiB tensor is never copied into a joined message.
"""
from __future__ import annotations

import json
import os
import socket
import struct
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from _vllm_gates.base.errors import GatesError

PROTOCOL_VERSION = 2
MAX_FRAME = 256 * 1024 * 1024  # bytes of one JSON body
MAX_BUFFERS = 4096  # buffers of one frame
MAX_BUFFER_BYTES = 4 * 1024 ** 3  # default cap on one frame's buffer bytes in all (`max-tensor-bytes`, sent in hello)
_HEADER = struct.Struct(">I")
_COUNT = struct.Struct(">I")
EXACT_FLAG = 1 << 31  # set in the length word when the body holds an integer outside the signed 64-bit range
BUFFERS_FLAG = 1 << 30  # set when buffers follow the body
RESERVED_FLAG = 1 << 29  # never set by a writer; a reader refuses it
_LENGTH_BITS = RESERVED_FLAG - 1
_COALESCE = 1 << 20  # buffers smaller than this are sent joined with their neighbours (one write, not one each)

Part = bytes | memoryview  # a piece of a frame as it is written

try:  # an accelerator only: the frames are the same JSON either way
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None  # type: ignore[assignment]  # checked `is None` before each use


class ChannelClosed(GatesError):
    """The other side closed the channel (or died) before a whole frame arrived."""


class ChannelTimeout(GatesError):
    """No whole frame arrived within the time allowed."""


class ProtocolError(GatesError):
    """A frame that is not what the protocol allows (too long, not JSON, not an object, buffers past the limits)."""


class OutOfBand:
    """A value whose bytes travel as a buffer beside the body (plain's tensors): the writer puts ``tag(i)`` in the
    JSON where the value is, i being the buffer's index in the frame, and sends ``data`` (bytes, format 'B')."""

    __slots__ = ()
    data: memoryview

    def tag(self, index: int) -> dict[str, Any]:
        raise NotImplementedError


class Received(NamedTuple):
    """One frame as read: its JSON body, its exact-numbers flag, its buffers (empty when bit 30 was clear)."""

    body: bytes
    exact: bool
    buffers: tuple[bytearray, ...] = ()


_RECEIVED = tuple.__new__


def _dumps(message: dict[str, Any]) -> tuple[bytes, bool, tuple[memoryview, ...]]:
    """The body, whether it holds integers past 64 bits (a reader must then parse its numbers exactly), and the
    buffers of the OutOfBand values in it, numbered in the order they are written."""
    if _orjson is not None:
        try:
            return _orjson.dumps(message), False, ()
        except TypeError:  # an OutOfBand value, an int past 64 bits, a lone surrogate: written below
            pass
    buffers: list[memoryview] = []

    def out_of_band(value: Any) -> Any:
        if not isinstance(value, OutOfBand):
            raise TypeError(f"{type(value).__name__} is not JSON")
        buffers.append(value.data)
        return value.tag(len(buffers) - 1)

    if _orjson is not None:
        try:
            return _orjson.dumps(message, default=out_of_band, option=_orjson.OPT_PASSTHROUGH_DATACLASS), False, tuple(buffers)
        except TypeError:
            buffers.clear()
    body = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=out_of_band).encode("utf-8")
    return body, True, tuple(buffers)


def _loads(body: bytes, exact: bool) -> Any:
    if _orjson is not None and not exact:
        return _orjson.loads(body)
    return json.loads(body.decode("utf-8"), parse_constant=_refuse_constant)


def orjson_parses() -> bool:
    """Whether frames without the exact flag are parsed by orjson (no NaN or infinity, no lone surrogate, no int past 64 bits)."""
    return _orjson is not None


def frame_parts(message: dict[str, Any], cap: int = MAX_BUFFER_BYTES) -> list[Part]:
    """A message as the pieces of its frame: the word, body and buffer table in one piece, then each buffer as it
    is (a memoryview, not copied). ProtocolError past MAX_FRAME, MAX_BUFFERS or ``cap`` buffer bytes in all."""
    body, exact, buffers = _dumps(message)
    if len(body) > MAX_FRAME:
        raise ProtocolError(f"a message of {len(body)} bytes exceeds the {MAX_FRAME}-byte frame limit")
    word = len(body) | (EXACT_FLAG if exact else 0)
    if not buffers:
        return [_HEADER.pack(word) + body]
    lengths = [view.nbytes for view in buffers]
    if len(buffers) > MAX_BUFFERS:
        raise ProtocolError(f"a message of {len(buffers)} buffers exceeds the limit of {MAX_BUFFERS} buffers per frame")
    if sum(lengths) > cap:
        raise ProtocolError(f"a message of {sum(lengths)} buffer bytes exceeds the cap of {cap} bytes (max-tensor-bytes)")
    table = _COUNT.pack(len(buffers)) + struct.pack(f">{len(lengths)}Q", *lengths)
    return [_HEADER.pack(word | BUFFERS_FLAG) + body + table, *buffers]


def frame(message: dict[str, Any], cap: int = MAX_BUFFER_BYTES) -> bytes:
    """A whole frame as one bytes object (for small messages: compared, counted, sent with descriptors)."""
    parts = frame_parts(message, cap)
    return parts[0] if len(parts) == 1 else b"".join(parts)  # type: ignore[return-value]


def frame_size(parts: Sequence[Part]) -> int:
    if len(parts) == 1:
        return len(parts[0])  # a frame without buffers: bytes
    return sum(part.nbytes if isinstance(part, memoryview) else len(part) for part in parts)


def send(sock: socket.socket, message: dict[str, Any], cap: int = MAX_BUFFER_BYTES) -> None:
    send_parts(sock, frame_parts(message, cap))


def send_parts(sock: socket.socket, parts: Sequence[Part]) -> None:
    """Frames' pieces, in order: small ones joined into one write (a judge's request with those sent ahead,
    docs/worker-protocol.md §10), each big buffer written from its own memory."""
    if sock.gettimeout() is not None:  # a receive may have left a short timeout on the socket
        sock.settimeout(None)  # (each settimeout is a system call: made only when it changes something)
    if len(parts) == 1:
        sock.sendall(parts[0])
        return
    pending: list[Part] = []
    for part in parts:
        if frame_size((part,)) < _COALESCE:
            pending.append(part)
            continue
        if pending:
            sock.sendall(b"".join(pending))
            pending = []
        sock.sendall(part)
    if pending:
        sock.sendall(b"".join(pending))


_BUFFERS: dict[int, bytearray] = {}  # bytes read past the last frame, per socket


def _wait(sock: socket.socket, deadline: float | None) -> None:
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ChannelTimeout()
        sock.settimeout(left)
    elif sock.gettimeout() is not None:
        sock.settimeout(None)


def _read_exactly(sock: socket.socket, count: int, deadline: float | None) -> bytes:
    buffer = _BUFFERS.setdefault(id(sock), bytearray())
    while len(buffer) < count:
        if deadline is not None or sock.gettimeout() is not None:
            _wait(sock, deadline)
        try:
            chunk = sock.recv(max(count - len(buffer), 1 << 16))
        except TimeoutError:
            raise ChannelTimeout() from None
        except ConnectionResetError:  # the peer exited with our frames unread: the channel is closed all the same
            chunk = b""
        if not chunk:
            _BUFFERS.pop(id(sock), None)
            raise ChannelClosed()
        buffer += chunk
    data = bytes(buffer[:count])
    del buffer[:count]
    return data


def _read_into(sock: socket.socket, target: bytearray, deadline: float | None) -> None:
    """Fill ``target`` from the socket: what was read ahead first, then straight into its memory (no chunks joined)."""
    pending = _BUFFERS.setdefault(id(sock), bytearray())
    filled = min(len(pending), len(target))
    target[:filled] = pending[:filled]
    del pending[:filled]
    view = memoryview(target)
    while filled < len(target):
        _wait(sock, deadline)
        try:
            count = sock.recv_into(view[filled:])
        except TimeoutError:
            raise ChannelTimeout() from None
        except ConnectionResetError:
            count = 0
        if not count:
            _BUFFERS.pop(id(sock), None)
            raise ChannelClosed()  # a truncated buffer: the message never arrived whole
        filled += count


def receive_buffered(sock: socket.socket, timeout: float | None = None, cap: int = MAX_BUFFER_BYTES) -> Received:
    """One frame: its body, exact-numbers flag and buffers; ChannelTimeout after ``timeout`` s, ChannelClosed at end
    of stream (a truncated buffer included), ProtocolError for a word, count or length the protocol refuses: the
    limits are checked before any buffer is allocated."""
    deadline = None if timeout is None else time.monotonic() + timeout
    (word,) = _HEADER.unpack(_read_exactly(sock, _HEADER.size, deadline))
    if word & (RESERVED_FLAG | BUFFERS_FLAG) or (word & _LENGTH_BITS) > MAX_FRAME:
        try:
            return _receive_rest(sock, word, deadline, cap)
        except ProtocolError:
            forget(sock)  # a broken channel: nothing read ahead of the refused frame is kept for a later socket of its id
            raise
    body = _read_exactly(sock, word & _LENGTH_BITS, deadline)  # the common frame, as version 1 wrote it
    return _RECEIVED(Received, (body, word >= EXACT_FLAG, ()))  # as Received(...), without its Python-level __new__


def _receive_rest(sock: socket.socket, word: int, deadline: float | None, cap: int) -> Received:
    """The rest of a frame whose word sets bit 29 or 30 or is too long: refused, or its body and buffers."""
    if word & RESERVED_FLAG:
        raise ProtocolError(f"a frame word 0x{word:08x} sets bit 29, which is reserved")
    length = word & _LENGTH_BITS
    if length > MAX_FRAME:
        raise ProtocolError(f"a frame of {length} bytes exceeds the {MAX_FRAME}-byte limit")
    body = _read_exactly(sock, length, deadline)
    (count,) = _COUNT.unpack(_read_exactly(sock, _COUNT.size, deadline))
    if not 1 <= count <= MAX_BUFFERS:
        raise ProtocolError(f"a frame announces {count} buffers; a buffered frame carries 1 to {MAX_BUFFERS}")
    lengths = struct.unpack(f">{count}Q", _read_exactly(sock, 8 * count, deadline))
    if sum(lengths) > cap:
        raise ProtocolError(f"a frame's {count} buffers come to {sum(lengths)} bytes, past the cap of {cap} bytes "
                            f"(max-tensor-bytes)")
    buffers = tuple(bytearray(n) for n in lengths)
    for buffer in buffers:
        _read_into(sock, buffer, deadline)
    return Received(body, word >= EXACT_FLAG, buffers)


def receive_frame(sock: socket.socket, timeout: float | None = None) -> tuple[bytes, bool]:
    """One frame's body and its exact-numbers flag, for readers of frames that carry no buffers (ProtocolError if
    one does); ChannelTimeout after ``timeout`` s, ChannelClosed at end of stream."""
    received = receive_buffered(sock, timeout)
    if received.buffers:
        raise ProtocolError(f"a frame carries {len(received.buffers)} buffers where none is expected")
    return received.body, received.exact


def parse(body: bytes, exact: bool) -> dict[str, Any]:
    """The message a frame's body holds; ProtocolError if it is not a UTF-8 JSON object."""
    try:
        message = _loads(body, exact)
    except (UnicodeDecodeError, ValueError) as exc:  # orjson's JSONDecodeError is a ValueError too
        raise ProtocolError(f"a frame is not UTF-8 JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"a message must be a JSON object, got {type(message).__name__}")
    return message


def receive(sock: socket.socket, timeout: float | None = None) -> dict[str, Any]:
    """One message of a frame without buffers; ChannelTimeout after ``timeout`` seconds, ChannelClosed at end of stream."""
    return parse(*receive_frame(sock, timeout))


def forget(sock: socket.socket) -> None:
    """Drop what was buffered for a socket that is closed."""
    _BUFFERS.pop(id(sock), None)


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON (non-finite floats are tagged)")


def socket_from_fd(fd: int) -> socket.socket:
    sock = socket.socket(fileno=fd)
    os.set_inheritable(sock.fileno(), False)
    return sock
