"""Framing of the worker protocol (docs/worker-protocol.md): a 4-byte big-endian length, then that many bytes of UTF-8 JSON.

Bit 31 of the length word says the body holds an integer outside the signed 64-bit range, to be read exactly.
"""
from __future__ import annotations

import json
import os
import socket
import struct
import time
from typing import Any

from _vllm_gates.errors import GatesError

PROTOCOL_VERSION = 1
MAX_FRAME = 256 * 1024 * 1024
_HEADER = struct.Struct(">I")
EXACT_FLAG = 1 << 31  # set in the length word when the body holds an integer outside the signed 64-bit range

try:  # an accelerator only: the frames are the same JSON either way
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None


class ChannelClosed(GatesError):
    """The other side closed the channel (or died) before a whole frame arrived."""


class ChannelTimeout(GatesError):
    """No whole frame arrived within the time allowed."""


class ProtocolError(GatesError):
    """A frame that is not what the protocol allows (too long, not JSON, not an object)."""


def _dumps(message: dict[str, Any]) -> tuple[bytes, bool]:
    """The body, and whether it holds integers past 64 bits (a reader must then parse its numbers exactly)."""
    if _orjson is not None:
        try:
            return _orjson.dumps(message), False
        except TypeError:  # an int past 64 bits, a lone surrogate: json writes the first and refuses the second
            pass
    body = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    return body, True


def _loads(body: bytes, exact: bool) -> Any:
    if _orjson is not None and not exact:
        return _orjson.loads(body)
    return json.loads(body.decode("utf-8"), parse_constant=_refuse_constant)


def orjson_parses() -> bool:
    """Whether frames without the exact flag are parsed by orjson (no NaN or infinity, no lone surrogate, no int past 64 bits)."""
    return _orjson is not None


def frame(message: dict[str, Any]) -> bytes:
    body, exact = _dumps(message)
    if len(body) > MAX_FRAME:
        raise ProtocolError(f"a message of {len(body)} bytes exceeds the {MAX_FRAME}-byte frame limit")
    return _HEADER.pack(len(body) | (EXACT_FLAG if exact else 0)) + body


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    send_frames(sock, [frame(message)])


def send_frames(sock: socket.socket, frames: list[bytes]) -> None:
    """Framed messages in one write (a judge's request with those sent ahead, docs/worker-protocol.md §10)."""
    if sock.gettimeout() is not None:  # a receive may have left a short timeout on the socket
        sock.settimeout(None)  # (each settimeout is a system call: made only when it changes something)
    sock.sendall(b"".join(frames) if len(frames) > 1 else frames[0])


_BUFFERS: dict[int, bytearray] = {}  # bytes read past the last frame, per socket


def _read_exactly(sock: socket.socket, count: int, deadline: float | None) -> bytes:
    buffer = _BUFFERS.setdefault(id(sock), bytearray())
    while len(buffer) < count:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout()
            sock.settimeout(left)
        elif sock.gettimeout() is not None:
            sock.settimeout(None)
        try:
            chunk = sock.recv(max(count - len(buffer), 1 << 16))
        except socket.timeout:
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


def receive_frame(sock: socket.socket, timeout: float | None = None) -> tuple[bytes, bool]:
    """One frame's body and its exact-numbers flag; ChannelTimeout after ``timeout`` s, ChannelClosed at end of stream."""
    deadline = None if timeout is None else time.monotonic() + timeout
    (word,) = _HEADER.unpack(_read_exactly(sock, _HEADER.size, deadline))
    length, exact = word & ~EXACT_FLAG, bool(word & EXACT_FLAG)
    if length > MAX_FRAME:
        raise ProtocolError(f"a frame of {length} bytes exceeds the {MAX_FRAME}-byte limit")
    return _read_exactly(sock, length, deadline), exact


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
    """One message; ChannelTimeout after ``timeout`` seconds, ChannelClosed at end of stream."""
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
