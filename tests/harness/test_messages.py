"""The protocol's messages as types (messages.py, docs/worker-protocol.md): each is written as the JSON object the
protocol has always sent (the same keys, in the same order) and read back equal; a malformed one is a ProtocolError
naming the message, the field and its value."""
from __future__ import annotations

import json

import pytest

from _vllm_gates.wire.channel import MAX_BUFFER_BYTES, PROTOCOL_VERSION, ProtocolError
from _vllm_gates.wire.messages import (Bye, CallOperation, CallTarget, ErrorBody, Fork, Forked, Hello, Ready, Refused,
                                       ServerHello, Status, StatusQuery, read)

pytestmark = pytest.mark.cpu

MESSAGES = [Hello("/p", ("/p", "/p/src"), ("/p/impl",), "impl of g.yaml", {"tp": 2}, 1024), ServerHello(("numpy",)),
            Ready(PROTOCOL_VERSION, 41, "python"), Ready(PROTOCOL_VERSION, 7, "c++", ("kv-plan", "page-bytes")),
            Refused("this worker speaks protocol version 2"), Fork(), Fork("/tmp/s", '{"reads": []}'), Forked(12),
            StatusQuery(12, 2.5), Status(None, 9), Status(0, None), Status(None, None, unknown=True), Bye()]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_a_message_crosses_json_and_reads_back_equal(message):
    assert read(json.loads(json.dumps(message.to_wire())), type(message)) == message


def test_the_wire_keeps_the_protocols_keys_and_order():
    assert list(Hello("/p", (), (), "r", {}, 1).to_wire()) == ["op", "version", "root", "path", "allowed_roots", "role",
                                                               "settings", "max_buffer_bytes"]
    assert Ready(PROTOCOL_VERSION, 3, "python").to_wire() == {"op": "ready", "version": PROTOCOL_VERSION, "pid": 3, "language": "python"}
    assert Fork().to_wire() == {"op": "fork"} and Status(None, 9).to_wire() == {"op": "status", "exit": None, "signal": 9}
    assert list(CallTarget("m:f", "a", None, None, {}).to_wire()) == ["op", "target", "anchor", "build", "build_anchor", "input"]
    assert CallOperation("kv-plan", [1]).to_wire() == {"op": "call", "operation": "kv-plan", "input": [1]}


def test_a_hello_without_its_optional_fields_takes_their_defaults():
    hello = read({"op": "hello", "version": PROTOCOL_VERSION, "root": "/p", "allowed_roots": []}, Hello)
    assert (hello.path, hello.settings, hello.max_buffer_bytes) == ((), {}, MAX_BUFFER_BYTES)


@pytest.mark.parametrize("data, kinds, named", [
    ({"op": "forked", "pid": "12"}, (Forked,), "a forked message's 'pid' must be a process id, got '12'"),
    ({"op": "forked"}, (Forked,), "a forked message lacks 'pid'"),
    ({"op": "ready", "version": PROTOCOL_VERSION, "operations": "kv-plan"}, (Ready,),
     "`operations` in its ready is not a list of names: kv-plan"),
    ({"op": "hello", "root": "/p", "allowed_roots": [], "max_buffer_bytes": -1}, (Hello,),
     "a hello message's 'max_buffer_bytes' must be a count, got -1"),
    ({"op": "status", "exit": "0", "signal": None}, (Status,), "a status message's 'exit' must be an exit status or null, got '0'"),
    ({"op": "launch"}, (Fork, StatusQuery), "expected a fork or status message, got op 'launch'"),
    ([1, 2], (Ready,), "a message is a JSON object, got [1, 2]"),
])
def test_a_malformed_message_is_a_protocol_error_naming_the_field_and_value(data, kinds, named):
    with pytest.raises(ProtocolError) as refused:
        read(data, *kinds)
    assert named in str(refused.value)


def test_an_error_body_reads_its_kind_message_and_side():
    assert ErrorBody("worker", "boom").to_wire() == {"kind": "worker", "message": "boom"}
    assert ErrorBody("definition", "no f", "build").to_wire() == {"kind": "definition", "message": "no f", "which": "build"}
    assert ErrorBody.from_wire({"kind": "definition", "message": "no such target", "which": "build"}) == \
        ErrorBody("definition", "no such target", "build")
    assert ErrorBody.from_wire({"kind": "ValueError", "message": 3}) == ErrorBody("ValueError", "3", None)
    with pytest.raises(ProtocolError, match="an error is an object with a text `kind`, got {'kind': 5}"):
        ErrorBody.from_wire({"kind": 5})
