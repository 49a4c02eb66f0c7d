"""Framing of the worker protocol: exact big integers, the frame limit, a closed channel, a timeout."""
from __future__ import annotations

import socket
import struct

import pytest

from _vllm_gates.wire.channel import EXACT_FLAG, MAX_FRAME, ChannelClosed, ChannelTimeout, ProtocolError, frame, receive, send

pytestmark = pytest.mark.cpu


def test_integers_past_64_bits_travel_exactly_and_set_the_flag():
    left, right = socket.socketpair()
    send(left, {"value": [2 ** 70, -(2 ** 64), 1.5]})
    assert receive(right, 5) == {"value": [2 ** 70, -(2 ** 64), 1.5]}
    (word,) = struct.unpack(">I", frame({"value": 2 ** 70})[:4])
    assert word & EXACT_FLAG
    (word,) = struct.unpack(">I", frame({"value": 2 ** 62})[:4])
    assert not word & EXACT_FLAG


def test_a_frame_over_the_limit_is_a_protocol_error():
    left, right = socket.socketpair()
    left.sendall(struct.pack(">I", MAX_FRAME + 1))  # bits 0-28 hold the length (v2: bits 29 and 30 are flags)
    with pytest.raises(ProtocolError, match="exceeds"):
        receive(right, 5)


def test_a_closed_channel_and_a_silent_one_are_told_apart():
    left, right = socket.socketpair()
    with pytest.raises(ChannelTimeout):
        receive(right, 0.2)
    left.sendall(struct.pack(">I", 10) + b"{")
    left.close()
    with pytest.raises(ChannelClosed):
        receive(right, 5)


def test_non_finite_numbers_and_non_objects_are_refused():
    left, right = socket.socketpair()
    for body in (b"NaN", b"[1]", b'{"a": Infinity}'):
        left.sendall(struct.pack(">I", len(body)) + body)
        with pytest.raises(ProtocolError):
            receive(right, 5)


def test_a_reply_digest_covers_everything_past_the_id():
    """Replies that say the same past their ids share a digest (the judge then parses one of them); any other byte,
    or the exact-numbers flag, tells them apart; a body that does not open with its id gets none (always parsed)."""
    from _vllm_gates.workers.worker_pool import RawReply

    def raw(message: dict, request_id: int, exact: bool = False) -> RawReply:
        body = frame(message)[4:]
        return RawReply(body, exact, request_id)

    same = {"result": {"value": [[0, 1], 0]}}
    first, second = raw({"id": 3, **same}, 3), raw({"id": 41, **same}, 41)
    assert first.content_digest() is not None and first.content_digest() == second.content_digest()
    assert raw({"id": 3, "result": {"value": [[0, 1], 1]}}, 3).content_digest() != first.content_digest()
    assert raw({"id": 3, **same}, 3, exact=True).content_digest() != first.content_digest()
    assert raw({"id": 3, **same}, 4).content_digest() is None, "an id other than the request's"
    assert raw({**same, "id": 3}, 3).content_digest() is None, "the id written last"
