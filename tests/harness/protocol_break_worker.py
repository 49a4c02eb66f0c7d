"""An external implementation of the example row whose replies break the worker protocol (docs/worker-protocol.md §3,
§5, §7.4) on some inputs, written without the engine: the tests' stand-in for a port that sends what the judge must
refuse (tests/harness/test_protocol_blame.py).

`python protocol_break_worker.py MODE WHEN --fd N`. MODE: one of BREAKS, the reply it sends; WHEN: `case` (the example's
fp16-page input: block size, heads, head size and dtype bytes all 2) or `five-heads` (any input of 5 heads, which only
the properties draw). Every other call is answered right (page bytes as an int); before each break it prints one line
to stderr naming it, the worker's "last output".
"""
from __future__ import annotations

import json
import os
import socket
import struct
import sys

BUFFERS_FLAG, RESERVED_FLAG = 1 << 30, 1 << 29


def tensor(dtype: object = "float32", shape: object = (2,), buffer: object = 0) -> dict:
    return {"$tensor": {"dtype": dtype, "shape": list(shape) if isinstance(shape, tuple) else shape, "buffer": buffer}}


# mode: (the reply's result, its buffers, the frame word's extra flags, a body that replaces the JSON)
BREAKS = {
    "short-buffer": ({"value": tensor()}, [b"\0" * 4], 0, None),
    "long-buffer": ({"value": tensor()}, [b"\0" * 12], 0, None),
    "missing-buffer-index": ({"value": tensor(buffer=3)}, [b"\0" * 8], 0, None),
    "no-buffers": ({"value": tensor()}, [], 0, None),
    "negative-shape": ({"value": tensor(shape=(-1,))}, [b""], 0, None),
    "overflowing-shape": ({"value": tensor(shape=(2 ** 63,))}, [b""], 0, None),
    "unknown-dtype": ({"value": tensor(dtype="complex64")}, [b"\0" * 16], 0, None),
    "tensor-past-the-cap": ({"value": tensor(shape=(1000,))}, [b"\0" * 8], 0, None),
    "buffers-past-the-cap": ({"value": tensor(shape=(20,))}, [b"\0" * 80], 0, None),
    "reserved-bit": ({"value": 1}, [], RESERVED_FLAG, None),
    "not-json": (None, [], 0, b"{this is not json"),
    "wrong-id": ("wrong-id", [], 0, None),
    "neither-result-nor-error": ("no-result", [], 0, None),
}
LIMITS = {  # what the judge's refusal names: the limit each break crosses (the project's max-tensor-bytes is 64)
    "short-buffer": "needs 8 bytes, but buffer 0 holds 4",
    "long-buffer": "needs 8 bytes, but buffer 0 holds 12",
    "missing-buffer-index": "a $tensor of buffer 3, not an index below the frame's 1 buffers",
    "no-buffers": "a $tensor, but the frame carries no buffers",
    "negative-shape": "a $tensor of shape [-1]: a shape is a list of ints >= 0",
    "overflowing-shape": "a dimension overflows a signed 64-bit int",
    "unknown-dtype": "a $tensor of dtype 'complex64', which is not one of bool",
    "tensor-past-the-cap": "needs 4000 bytes, past the cap of 64 bytes (max-tensor-bytes)",
    "buffers-past-the-cap": "buffers come to 80 bytes, past the cap of 64 bytes (max-tensor-bytes)",
    "reserved-bit": "sets bit 29, which is reserved",
    "not-json": "a frame is not UTF-8 JSON",
    "wrong-id": "it answered request",
    "neither-result-nor-error": "a reply has `result` or `error`, got keys ['id']",
}


def write_frame(sock: socket.socket, message: dict, buffers: list[bytes] = (), flags: int = 0, body: bytes | None = None) -> None:
    body = json.dumps(message, separators=(",", ":")).encode() if body is None else body
    word = len(body) | flags | (BUFFERS_FLAG if buffers else 0)
    table = struct.pack(">I", len(buffers)) + b"".join(struct.pack(">Q", len(b)) for b in buffers) if buffers else b""
    sock.sendall(struct.pack(">I", word) + body + table + b"".join(buffers))


def breaks_here(when: str, data: dict) -> bool:
    if when == "case":
        return (data["block_size"], data["heads"], data["head_size"], data["dtype_bytes"]) == (2, 2, 2, 2)
    return data["heads"] == 5


def broken_reply(sock: socket.socket, mode: str, request_id: int) -> None:
    result, buffers, flags, body = BREAKS[mode]
    print(f"protocol-break worker: sending {mode}", file=sys.stderr, flush=True)
    if result == "wrong-id":
        write_frame(sock, {"id": request_id + 7, "result": {"value": 1}})
    elif result == "no-result":
        write_frame(sock, {"id": request_id})
    else:
        write_frame(sock, {"id": request_id, "result": result}, buffers, flags, body)


def main() -> int:
    from external_worker import read_frame  # beside this file, which runs as a script (sys.path[0] is its folder)

    mode, when, fd = sys.argv[1], sys.argv[2], int(sys.argv[sys.argv.index("--fd") + 1])
    sock = socket.socket(fileno=fd)
    os.set_inheritable(fd, False)
    hello = read_frame(sock)
    if hello is None or hello.get("op") != "hello":
        return 2
    write_frame(sock, {"op": "ready", "version": hello["version"], "pid": os.getpid(), "language": "python-external",
                       "operations": ["page-bytes"]})
    while True:
        request = read_frame(sock)
        if request is None or request.get("op") == "bye":
            return 0
        reply: dict = {"id": request["id"]}
        if request.get("target") == "_vllm_gates.wire.standins:wrong_everywhere":
            reply["result"] = {"value": {"$wrong": True}}
        else:
            data = {key: value for key, value in request["input"]["$map"]}
            if breaks_here(when, data):
                broken_reply(sock, mode, request["id"])
                continue
            if data["heads"] < 0:
                reply["result"] = {"raised": {"type": "invalid-argument", "mro": ["invalid-argument"],
                                              "message": f"heads must be >= 0, got {data['heads']}"}}
            else:
                reply["result"] = {"value": 2 * data["block_size"] * data["heads"] * data["head_size"] * data["dtype_bytes"]}
        write_frame(sock, reply)


if __name__ == "__main__":
    sys.exit(main())
