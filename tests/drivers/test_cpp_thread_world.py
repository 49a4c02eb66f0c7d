"""The C++ port's world of rank threads (issue 30 item 5, drivers/cpp/include/vllm/distributed/thread_world.h),
through its probe operation: all_reduce sums in every rank, all_gather concatenates in rank order, and a rank that
fails or leaves early makes the call fail naming it, without a hang."""
from __future__ import annotations

import time

import pytest

from tests.drivers.wire_v2 import Worker

pytestmark = pytest.mark.cpu


def _probe(worker: Worker, **inputs: object) -> dict:
    return worker.call("tp-thread-world-probe", {"$map": [[k, v] for k, v in inputs.items()]}).body


def _gathered(rank_answer: list) -> dict:
    """The {shape, data} map of a rank's answer (the wire's `$map` pairs as a dict)."""
    return dict(rank_answer[1]["$map"])


@pytest.mark.parametrize("tp", [1, 2, 3, 8])
def test_all_reduce_sums_and_all_gather_concatenates_in_rank_order(v2_ready: Worker, tp: int) -> None:
    ranks = _probe(v2_ready, tp=tp, fail_rank=None, return_rank=None, gather_dim=-1)["result"]["value"]
    total = tp * (tp + 1) / 2
    assert len(ranks) == tp
    for rank_answer in ranks:
        assert rank_answer[0] == [total, 10 * total]
        row = _gathered(rank_answer)
        assert row["shape"] == [2, tp]
        assert row["data"] == [float(r) for r in range(tp)] + [r + 0.5 for r in range(tp)]


def test_all_gather_along_the_first_dim_stacks_whole_tensors(v2_ready: Worker) -> None:
    ranks = _probe(v2_ready, tp=3, fail_rank=None, return_rank=None, gather_dim=0)["result"]["value"]
    for rank_answer in ranks:
        row = _gathered(rank_answer)
        assert row["shape"] == [6, 1] and row["data"] == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]


@pytest.mark.parametrize(("tp", "fail_rank"), [(2, 0), (4, 3), (8, 5)])
def test_a_rank_that_throws_fails_the_call_naming_it_and_releases_the_others(v2_ready: Worker, tp: int,
                                                                             fail_rank: int) -> None:
    started = time.monotonic()
    body = _probe(v2_ready, tp=tp, fail_rank=fail_rank, return_rank=None)
    assert time.monotonic() - started < 5
    assert body["error"]["kind"] == "worker", body
    assert f"rank {fail_rank} of tp={tp} failed: the probe's planted failure on rank {fail_rank}" in body["error"]["message"]
    again = _probe(v2_ready, tp=tp, fail_rank=None, return_rank=None)  # the next call runs a fresh world
    assert len(again["result"]["value"]) == tp


def test_a_rank_that_returns_while_the_others_wait_in_a_collective_fails_the_call(v2_ready: Worker) -> None:
    body = _probe(v2_ready, tp=4, fail_rank=None, return_rank=2)
    assert "rank 2 of tp=4 failed: returned while" in body["error"]["message"], body
