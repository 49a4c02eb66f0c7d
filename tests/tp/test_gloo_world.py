"""The gloo world of impl/distributed/gloo_world.py (issue 30 item 3 and "Bad input"): results in rank order, the world
reused, a rank that dies or hangs named in a RuntimeError with no hang and a fresh world after, collectives."""
from __future__ import annotations

import os
import time

import pytest
import torch

from impl.distributed import communication_op
from impl.distributed.gloo_world import run_on_ranks

pytestmark = [pytest.mark.cpu, pytest.mark.dist]


def _identity(rank: int, tp: int, payload: object) -> tuple[int, int, object, int]:
    return rank, tp, payload, os.getpid()


def _collectives(rank: int, tp: int, payload: object) -> tuple[torch.Tensor, torch.Tensor]:
    mine = torch.full((2, 1), float(rank + 1))
    return communication_op.all_reduce(mine.clone()), communication_op.all_gather(mine, dim=-1)


def _cpus(rank: int, tp: int, payload: object) -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _tensors(rank: int, tp: int, payload: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return payload, payload[1:, ::2] * (rank + 1), payload.t()


def _exit_on_rank_one(rank: int, tp: int, payload: object) -> int:
    if rank == 1:
        os._exit(7)
    return rank


def _hang_on_rank_two(rank: int, tp: int, payload: object) -> int:
    if rank == 2:
        time.sleep(600)
    return rank


def _raise_on_rank_one(rank: int, tp: int, payload: object) -> int:
    if rank == 1:
        raise ValueError("rank one refuses")
    return rank


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_results_come_back_in_rank_order_from_the_same_processes(tp: int) -> None:
    first = run_on_ranks(tp, _identity, {"x": [1, 2]})
    again = run_on_ranks(tp, _identity, "second")
    assert [entry[:3] for entry in first] == [(rank, tp, {"x": [1, 2]}) for rank in range(tp)]
    assert [entry[3] for entry in again] == [entry[3] for entry in first]
    assert len({entry[3] for entry in first} | {os.getpid()}) == tp + 1


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_all_reduce_sums_and_all_gather_concatenates_in_rank_order(tp: int) -> None:
    for reduced, gathered in run_on_ranks(tp, _collectives, None):
        assert reduced.tolist() == [[tp * (tp + 1) / 2]] * 2
        assert gathered.tolist() == [list(map(float, range(1, tp + 1)))] * 2


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_a_world_larger_than_the_cpus_keeps_each_rank_on_one_cpu_round_robin(tp: int) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    expected = [[cpus[rank % len(cpus)]] for rank in range(tp)] if tp > len(cpus) else [cpus] * tp
    assert run_on_ranks(tp, _cpus, None) == expected


def test_a_world_forked_by_a_thread_dies_with_that_thread() -> None:
    import threading

    from impl.distributed import gloo_world

    gloo_world._tear_down_all()  # a tp=3 world an earlier test of this worker started (main thread) would be reused
    pids: list[int] = []
    starter = threading.Thread(target=lambda: pids.extend(entry[3] for entry in run_on_ranks(3, _identity, None)))
    starter.start()
    starter.join()
    assert len(pids) == 3
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(pid) for pid in pids)
    assert [entry[0] for entry in run_on_ranks(3, _identity, None)] == [0, 1, 2]


def test_tensors_travel_both_ways_with_their_dtype_shape_strides_and_values() -> None:
    sent = torch.arange(12, dtype=torch.float32).reshape(3, 4).to(torch.bfloat16)
    for rank, (back, strided, transposed) in enumerate(run_on_ranks(2, _tensors, sent)):
        assert back.dtype == torch.bfloat16 and torch.equal(back, sent)
        assert torch.equal(strided, sent[1:, ::2] * (rank + 1))
        assert transposed.stride() == (1, 4) and torch.equal(transposed, sent.t())


def test_a_rank_that_exits_is_named_and_the_next_call_gets_a_fresh_world() -> None:
    before = {entry[3] for entry in run_on_ranks(2, _identity, None)}
    with pytest.raises(RuntimeError, match=r"rank 1 of the gloo world of tp=2 died mid-call \(exit status 7\)"):
        run_on_ranks(2, _exit_on_rank_one, None, timeout_s=20)
    after = {entry[3] for entry in run_on_ranks(2, _identity, None)}
    assert not before & after


def test_a_rank_that_hangs_is_named_within_the_timeout_and_torn_down() -> None:
    before = {entry[3] for entry in run_on_ranks(4, _identity, None)}
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"^rank 2 of the gloo world of tp=4 did not answer within 1.5 s"):
        run_on_ranks(4, _hang_on_rank_two, None, timeout_s=1.5)
    assert time.monotonic() - started < 5
    for pid in before:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert [entry[0] for entry in run_on_ranks(4, _identity, None)] == [0, 1, 2, 3]


def test_an_exception_on_a_rank_is_raised_with_the_rank_noted_and_the_world_kept() -> None:
    before = [entry[3] for entry in run_on_ranks(2, _identity, None)]
    with pytest.raises(ValueError, match="rank one refuses") as raised:
        run_on_ranks(2, _raise_on_rank_one, None)
    assert "raised on rank 1 of the gloo world of tp=2" in "\n".join(raised.value.__notes__)
    assert [entry[3] for entry in run_on_ranks(2, _identity, None)] == before


@pytest.mark.parametrize("tp, error, match", [
    (0, ValueError, r"tp must be an int in \[1, 8\], got 0"),
    (9, ValueError, r"tp must be an int in \[1, 8\], got 9 \(a gloo world of at most 8 ranks\)"),
    (True, TypeError, r"tp must be an int in \[1, 8\], got True \(bool\)"),
])
def test_a_tp_outside_the_worlds_is_refused(tp: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        run_on_ranks(tp, _identity, None)  # type: ignore[arg-type]


def test_a_function_that_does_not_pickle_is_refused() -> None:
    with pytest.raises(TypeError, match="fn and payload must pickle"):
        run_on_ranks(2, lambda rank, tp, payload: rank, None)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as stat:  # a zombie waiting for init to reap it is gone too
        return stat.read().split(")")[-1].split()[0] == "Z"


def _sleep(rank: int, tp: int, payload: float) -> None:
    time.sleep(payload)


def test_no_rank_outlives_a_parent_killed_mid_call_without_cleanup() -> None:
    import subprocess
    import sys

    script = ("import os, signal, threading\n"
              "from impl.distributed.gloo_world import run_on_ranks\n"
              "from tests.tp.test_gloo_world import _identity, _sleep\n"
              "print(' '.join(str(entry[3]) for entry in run_on_ranks(4, _identity, None)), flush=True)\n"
              "threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGKILL)).start()\n"
              "run_on_ranks(4, _sleep, 60.0)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    pids = [int(pid) for pid in done.stdout.split()]
    assert len(pids) == 4, done.stderr
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(pid) for pid in pids)
