"""What the C++ driver refuses of protocol version 2 (issue 29 item 1; the contract's "Frame" and "The $tensor
value"): a `$tensor` that breaks the contract is a protocol error naming what and where, and the worker carries on;
a frame it cannot read (bit 29, a buffer count or byte total past the limits, checked before anything is allocated,
a truncated buffer) ends the worker with a message naming the number and the limit; a result past the cap is
not-plain naming the tensor's place. Frames are hand-made (wire_v2.py).
"""
from __future__ import annotations

import json
import socket
import struct
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _vllm_gates.wire.channel import PROTOCOL_VERSION
from tests.drivers.wire_v2 import BUFFERS, MAX_BUFFERS, RESERVED, Raw, Worker, frame, tag

pytestmark = pytest.mark.cpu

FLOATS = Raw.of(np.arange(6, dtype=np.float32).reshape(2, 3))


def _tensor(dtype: str = "float32", shape: Any = (2, 3), buffer: Any = 0) -> dict[str, Any]:
    return {"$tensor": {"dtype": dtype, "shape": list(shape) if isinstance(shape, tuple) else shape, "buffer": buffer}}


def _protocol_error(worker: Worker, wire: Any, buffers: list[bytes]) -> str:
    reply = worker.call("driver-echo", wire, buffers)
    error = reply.body.get("error")
    assert error is not None and error["kind"] == "protocol", reply.body
    assert worker.value("driver-echo", 1) == 1  # and the worker carries on
    return error["message"]


@pytest.mark.parametrize("wire, buffers, expected", [
    ([_tensor(dtype="complex64")], [FLOATS.data], ['$tensor dtype "complex64" is not one of bool, uint8', "at input[0]"]),
    ([_tensor(dtype=5)], [FLOATS.data], ["$tensor dtype of a number, not a string", "at input[0]"]),
    ({"$tuple": [_tensor(shape=[2, -3])]}, [FLOATS.data], ["$tensor shape [2,-3] is not a list", "at input[0]"]),
    ([_tensor(shape=[1.5])], [FLOATS.data], ["$tensor shape [1.5] is not a list of at most 64 ints >= 0"]),
    ([_tensor(shape=[True])], [FLOATS.data], ["$tensor shape [true] is not a list"]),
    ([_tensor(shape="6")], [FLOATS.data], ['$tensor shape "6" is not a list']),
    ([_tensor(shape=[1] * 65)], [FLOATS.data], ["is not a list of at most 64 ints >= 0"]),
    ([_tensor(shape=[2**62])], [FLOATS.data], [f"$tensor shape [{2**62}] of float32 overflows 64 bits of bytes"]),
    ([_tensor(shape=[2**31, 1])], [FLOATS.data], [f"$tensor shape [{2**31},1] of float32 is {2**33} bytes, over the limit of "
                                                  f"{2**32} buffer bytes"]),
    ([_tensor(shape=[5])], [FLOATS.data], ["$tensor of float32 (5,) is 20 bytes but buffer 0 has 24", "at input[0]"]),
    ([_tensor(buffer=3)], [FLOATS.data], ["$tensor names buffer 3 of a message with 1 buffers", "at input[0]"]),
    ([_tensor(buffer=-1)], [FLOATS.data], ["$tensor buffer -1 is not an int >= 0"]),
    ([_tensor(buffer="0")], [FLOATS.data], ['$tensor buffer "0" is not an int >= 0']),
    ([_tensor(), _tensor()], [FLOATS.data], ["$tensor names buffer 0, which an earlier $tensor already uses", "at input[1]"]),
    ([_tensor()], [FLOATS.data, b"spare"], ["buffer 1 of the message's 2 is used by no $tensor in input"]),
    ({"$map": [["x", _tensor()]]}, [], ["$tensor names buffer 0 but the message has no buffers", 'at input["x"]']),
    ([_tensor("bool", (3,))], [bytes([0, 1, 2])], ["bool $tensor element 2 is the byte 2, not 0 or 1"]),
    ({"$map": [[_tensor(), 1]]}, [FLOATS.data], ["a $tensor as a map key at input.<key 0>"]),
    ({"$map": [[{"$tuple": [_tensor()]}, 1]]}, [FLOATS.data], ["a $tensor as a map key at input.<key 0>[0]"]),
    ([{"$tensor": {"dtype": "float32", "shape": [2, 3], "buffer": 0, "device": "cpu"}}], [FLOATS.data],
     ['$tensor of an object with keys ["dtype", "shape", "buffer", "device"], not {"dtype": D, "shape": [...], "buffer": i}']),
    ([{"$tensor": {"dtype": "float32", "shape": [2, 3]}}], [FLOATS.data], ['an object with keys ["dtype", "shape"]']),
    ([{"$tensor": [1]}], [FLOATS.data], ["$tensor of an array, not"]),
])
def test_a_tensor_that_breaks_the_contract_is_a_protocol_error_naming_it(
        v2_ready: Worker, wire: Any, buffers: list[bytes], expected: list[str]) -> None:
    message = _protocol_error(v2_ready, wire, buffers)
    assert message.startswith("input is not plain data: "), message
    for part in expected:
        assert part in message, message


def _ends_with(worker: Worker, data: bytes, *expected: str, close: bool = False) -> None:
    worker.sock.sendall(data)
    if close:
        worker.sock.shutdown(socket.SHUT_WR)
    assert worker.exit_status() == 3
    for part in expected:
        assert part in worker.output(), worker.output()


def _body() -> bytes:
    return json.dumps({"op": "call", "id": 1, "operation": "driver-echo", "input": 1}).encode()


def test_bit_29_is_refused(v2_ready: Worker) -> None:
    body = _body()
    _ends_with(v2_ready, struct.pack(">I", len(body) | RESERVED) + body, "bit 29 (reserved)")


@pytest.mark.parametrize("count", [0, MAX_BUFFERS + 1, 2**32 - 1])
def test_a_buffer_count_outside_1_to_4096_is_refused(v2_ready: Worker, count: int) -> None:
    body = _body()
    _ends_with(v2_ready, struct.pack(">I", len(body) | BUFFERS) + body + struct.pack(">I", count),
               f"a frame with {count} buffers: the count must be 1 to 4096")


def test_lengths_past_the_cap_are_refused_before_any_buffer_is_read(v2_worker: Worker) -> None:
    assert v2_worker.hello(PROTOCOL_VERSION, max_buffer_bytes=1000)["op"] == "ready"
    body = _body()
    # no buffer bytes follow: the driver must refuse on the lengths alone, not wait for the bytes
    _ends_with(v2_worker, struct.pack(">I", len(body) | BUFFERS) + body + struct.pack(">IQQ", 2, 600, 600),
               "a frame's buffers come to 1200 bytes by buffer 1 (of 600 bytes), over the limit of 1000 buffer bytes")


def test_a_huge_length_is_refused_without_allocating(v2_ready: Worker) -> None:
    body = _body()
    _ends_with(v2_ready, struct.pack(">I", len(body) | BUFFERS) + body + struct.pack(">IQ", 1, 2**63),
               f"come to {2**63} bytes by buffer 0", f"over the limit of {2**32} buffer bytes per message")


def test_a_sum_past_64_bits_is_refused(v2_worker: Worker) -> None:
    assert v2_worker.hello(PROTOCOL_VERSION, max_buffer_bytes=2**64 - 1)["op"] == "ready"
    body = _body()
    _ends_with(v2_worker, struct.pack(">I", len(body) | BUFFERS) + body + struct.pack(">IQQ", 2, 2**63, 2**63 + 5),
               f"come to more than {2**64 - 1} bytes by buffer 1")


def test_a_truncated_buffer_ends_the_worker(v2_ready: Worker) -> None:
    buffers: list[bytes] = []
    message = {"op": "call", "id": 1, "operation": "driver-echo", "input": tag(FLOATS, buffers)}
    _ends_with(v2_ready, frame(message, buffers)[:-10], "the channel closed inside a frame's buffers", close=True)


def test_buffers_on_another_request_are_a_protocol_error(v2_ready: Worker) -> None:
    v2_ready.send({"op": "check", "id": 9, "targets": []}, [b"x"])
    reply = v2_ready.receive()
    assert reply.body["id"] == 9 and reply.body["error"]["kind"] == "protocol"
    assert "carries 1 buffers; only a call's input holds tensors" in reply.body["error"]["message"]
    assert v2_ready.value("driver-echo", 1) == 1


@pytest.mark.parametrize("cap", [-1, "1000", 1.5, True])
def test_a_bad_max_buffer_bytes_is_refused(v2_worker: Worker, cap: Any) -> None:
    reply = v2_worker.hello(PROTOCOL_VERSION, max_buffer_bytes=cap)
    assert reply == {"op": "refused",
                     "reason": f"the judge's hello is refused: its max_buffer_bytes is {json.dumps(cap)}, not an int >= 0"}
    assert v2_worker.exit_status() == 2


@pytest.mark.parametrize("cap, place, expected", [
    (100, 'result["bfloat16"]', "$tensor shape [10,10] of bfloat16 is 200 bytes, over the limit of 100 buffer bytes per "
                                "message (max_buffer_bytes)"),
    (500, 'result["float32"]', "a tensor of 400 bytes that brings the message's buffers to 800 bytes, over the limit of 500 "
                               "(max_buffer_bytes)"),
])
def test_a_result_past_the_cap_is_not_plain_naming_its_place(v2_worker: Worker, cap: int, place: str, expected: str) -> None:
    assert v2_worker.hello(PROTOCOL_VERSION, max_buffer_bytes=cap)["op"] == "ready"
    reply = v2_worker.call("driver-arange", {"$map": [["shape", [10, 10]], ["scale", 1.0]]})
    assert reply.buffers == [] and reply.body["error"]["kind"] == "not-plain", reply.body
    assert reply.body["error"]["message"] == f"result is not plain data: {expected} at {place}"
    assert v2_worker.value("driver-arange", {"$map": [["shape", [2]], ["scale", 1.0]]})["float32"].shape == (2,)


def test_the_lines_mode_carries_no_tensors(driver: Path) -> None:
    requests = [{"operation": "driver-echo", "input": _tensor()},
                {"operation": "driver-arange", "input": {"$map": [["shape", [2]], ["scale", 1.0]]}}]
    done = subprocess.run([str(driver), "--lines"], input="".join(json.dumps(r) + "\n" for r in requests),
                          capture_output=True, text=True, timeout=30)
    first, second = (json.loads(line)["error"] for line in done.stdout.splitlines())
    assert first["kind"] == "protocol" and "$tensor names buffer 0 but the message has no buffers" in first["message"]
    assert second == {"kind": "not-plain", "message": "result is not plain data: a tensor, which the --lines mode cannot "
                                                     "carry (it has no buffers) at result[\"bfloat16\"]"}


def test_a_result_of_more_than_4096_tensors_is_not_plain(v2_ready: Worker) -> None:
    assert len(v2_ready.value("driver-arange", {"$map": [["shape", [1]], ["scale", 1.0], ["copies", MAX_BUFFERS]]})) == MAX_BUFFERS
    reply = v2_ready.call("driver-arange", {"$map": [["shape", [1]], ["scale", 1.0], ["copies", MAX_BUFFERS + 1]]})
    assert reply.body["error"] == {"kind": "not-plain", "message": "result is not plain data: a tensor past the limit of "
                                                                   "4096 tensors (buffers) per message at result[4096]"}
