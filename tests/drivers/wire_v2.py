"""Protocol version 2's frames and `$tensor` values, written for the C++ driver's tests from the contract alone
(issue 29 item 1; docs/worker-protocol.md §3/§7), not from the engine's channel.py, so the two sides stay independent.

A frame: a 4-byte big-endian word (bits 0-28 the JSON body's length, bit 29 reserved, bit 30 buffers, bit 31 exact
numbers), the body, then with bit 30 a 4-byte buffer count, 8-byte lengths and the buffers back to back. Tensors
travel as {"$tensor": {"dtype", "shape", "buffer"}} naming a buffer of little-endian row-major bytes.
"""
from __future__ import annotations

import json
import socket
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

EXACT = 1 << 31
BUFFERS = 1 << 30
RESERVED = 1 << 29
LENGTH_MASK = (1 << 29) - 1
MAX_BUFFERS = 4096

# The wire's dtype names and the numpy dtype of their bytes (bfloat16: its raw bits, as little-endian uint16).
DTYPES = {"bool": "|b1", "uint8": "|u1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
          "float16": "<f2", "bfloat16": "<u2", "float32": "<f4", "float64": "<f8"}


@dataclass(frozen=True)
class Raw:
    """A tensor as the wire has it: dtype name, shape and its bytes."""

    dtype: str
    shape: tuple[int, ...]
    data: bytes

    @staticmethod
    def of(array: np.ndarray, dtype: str | None = None) -> "Raw":
        """`array` in the wire's layout; `dtype` names it where numpy's name differs (bfloat16 from uint16 bits)."""
        name = dtype or array.dtype.name
        return Raw(name, tuple(array.shape), np.ascontiguousarray(array, dtype=DTYPES[name]).tobytes())

    def array(self) -> np.ndarray:
        """The elements (bfloat16 as its uint16 bits)."""
        return np.frombuffer(self.data, dtype=DTYPES[self.dtype]).reshape(self.shape)


def tag(raw: Raw, buffers: list[bytes], index: int | None = None) -> dict[str, Any]:
    """The `$tensor` tag of `raw`, its bytes appended to `buffers` (the tag names `index` if given)."""
    buffers.append(raw.data)
    return {"$tensor": {"dtype": raw.dtype, "shape": list(raw.shape), "buffer": len(buffers) - 1 if index is None else index}}


def frame(message: dict[str, Any] | bytes, buffers: Sequence[bytes] = (), *, flags: int = 0) -> bytes:
    """One message; `flags` are or-ed into the header word (bit 30 is set whenever there are buffers)."""
    body = message if isinstance(message, bytes) else json.dumps(message, separators=(",", ":"), allow_nan=False).encode()
    word = len(body) | flags | (BUFFERS if buffers else 0)
    out = [struct.pack(">I", word), body]
    if buffers:
        out.append(struct.pack(">I", len(buffers)) + b"".join(struct.pack(">Q", len(b)) for b in buffers))
        out.extend(buffers)
    return b"".join(out)


def from_wire(value: Any, buffers: list[bytes]) -> Any:
    """A reply's value with `$map` (string keys) as dicts, `$tuple` as lists and each `$tensor` as the Raw it names."""
    if isinstance(value, list):
        return [from_wire(item, buffers) for item in value]
    if not isinstance(value, dict):
        return value
    (name, body), = value.items()
    if name == "$tensor":
        assert set(body) == {"dtype", "shape", "buffer"}, body
        return Raw(body["dtype"], tuple(body["shape"]), buffers[body["buffer"]])
    if name == "$map":
        return {key: from_wire(item, buffers) for key, item in body}
    if name == "$tuple":
        return [from_wire(item, buffers) for item in body]
    if name == "$float":
        return float(body)
    raise AssertionError(f"an unexpected tag {name}")


@dataclass
class Message:
    """One frame as read."""

    word: int
    raw_body: bytes
    body: dict[str, Any]
    buffers: list[bytes] = field(default_factory=list)


class Worker:
    """The driver on one end of a socketpair, spoken to in hand-made version 2 frames."""

    def __init__(self, exe: Path, log: Path, cwd: Path):
        self.sock, theirs = socket.socketpair()
        self.log_path = log
        self.log = log.open("wb")
        self.proc = subprocess.Popen([str(exe), "--fd", str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                     cwd=cwd, start_new_session=True)
        theirs.close()
        self.sock.settimeout(30)
        self.ids = 0

    def send(self, message: dict[str, Any] | bytes, buffers: Sequence[bytes] = (), *, flags: int = 0) -> None:
        self.sock.sendall(frame(message, buffers, flags=flags))

    def _exactly(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(min(n - len(data), 1 << 20))
            if not chunk:
                raise EOFError(f"the driver closed the channel after {len(data)} of {n} bytes")
            data += chunk
        return bytes(data)

    def receive(self) -> Message:
        word, = struct.unpack(">I", self._exactly(4))
        assert not word & RESERVED, hex(word)
        raw_body = self._exactly(word & LENGTH_MASK)
        body = json.loads(raw_body)
        if not word & BUFFERS:
            return Message(word, raw_body, body)
        count, = struct.unpack(">I", self._exactly(4))
        assert 1 <= count <= MAX_BUFFERS
        lengths = struct.unpack(f">{count}Q", self._exactly(8 * count))
        return Message(word, raw_body, body, [self._exactly(n) for n in lengths])

    def hello(self, version: int, **extra: Any) -> dict[str, Any]:
        self.send({"op": "hello", "version": version, "root": "/", "path": [], "allowed_roots": ["impl"],
                   "role": "impl of a tensor test", **extra})
        return self.receive().body

    def call(self, operation: str, wire_input: Any, buffers: Sequence[bytes] = ()) -> Message:
        """One call with the input already in wire form; the reply, its id checked."""
        self.ids += 1
        self.send({"op": "call", "id": self.ids, "operation": operation, "input": wire_input}, buffers)
        reply = self.receive()
        assert reply.body["id"] == self.ids, reply.body
        return reply

    def value(self, operation: str, wire_input: Any, buffers: Sequence[bytes] = ()) -> Any:
        """A call's result value with its tensors as Raw; fails the test on an error reply."""
        reply = self.call(operation, wire_input, buffers)
        assert "result" in reply.body, reply.body
        return from_wire(reply.body["result"]["value"], reply.buffers)

    def exit_status(self) -> int:
        return self.proc.wait(timeout=10)

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        self.sock.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
