"""A real torch.distributed gloo world of ``tp`` forked processes that runs one function on every rank (issue 30
item 3, "the world is started once and reused"; spec/tensor-parallel.md section 5).

The world for a given tp is forked once per owning process and reused: its ranks join through a TCPStore on
loopback (rank 0 hosts it on a free port), take commands and send results over pipes (pickled by value, CPU tensors
as their storage's bytes: impl/distributed/tensor_pickle.py), and die with their parent (PR_SET_PDEATHSIG, the
pipe's end, atexit). A rank that dies or overruns a call is a RuntimeError naming it; the world is then killed and
forgotten, and the next call starts a fresh one.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import pickle
import signal
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection, Pipe, wait
from typing import Any, Callable

from impl.distributed import tensor_pickle

MAX_TP = 8
"""The largest world this port starts (issue 30: tp in {1, 2, 4, 8})."""

COLLECTIVE_TIMEOUT_S = 300.0
"""gloo's own timeout inside the ranks; the parent bounds every call by its timeout_s long before it."""

ERROR_GRACE_S = 2.0
"""After one rank raised, how long the others get to report before the world is taken as stuck and torn down."""

_PR_SET_PDEATHSIG = 1

RankFunction = Callable[[int, int, Any], Any]


@dataclass(frozen=True)
class _Rank:
    """One forked rank as its parent sees it: the process id and the parent's end of its pipe."""

    rank: int
    pid: int
    conn: Connection


@dataclass(frozen=True)
class _World:
    """A started world: its size, the process that forked it, and its ranks in rank order."""

    tp: int
    owner: int
    ranks: tuple[_Rank, ...]


_worlds: dict[tuple[int, int], _World] = {}


def run_on_ranks(tp: int, fn: RankFunction, payload: Any, *, timeout_s: float = 60) -> list[Any]:
    """``fn(rank, tp, payload)`` on every rank of the gloo world of ``tp`` processes; the results in rank order.

    ``fn`` must be a module-level function (it is pickled by reference). An exception raised by ``fn`` on a rank is
    raised here with a note naming the rank; a rank that dies or runs past ``timeout_s`` is a RuntimeError naming it,
    and the world is torn down so that the next call starts a fresh one. A world is forked by the calling thread and
    its ranks die with that thread (PR_SET_PDEATHSIG names the thread, not the process): start it from one that lives.
    """
    _check_tp(tp)
    if not callable(fn):
        raise TypeError(f"run_on_ranks: fn must be a module-level function, got {fn!r} ({type(fn).__name__})")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError(f"run_on_ranks: timeout_s must be a number > 0, got {timeout_s!r}")
    try:
        command = tensor_pickle.dumps((fn, payload))
    except (pickle.PicklingError, AttributeError, TypeError) as error:
        raise TypeError(f"run_on_ranks: fn and payload must pickle (fn a module-level function): {error}") from None
    deadline = time.monotonic() + timeout_s
    world = _world(tp, deadline, timeout_s)
    try:
        for member in world.ranks:
            member.conn.send_bytes(command)
    except OSError:  # a rank gone between calls: its pipe is closed
        pass
    return _collect(world, deadline, timeout_s)


def _check_tp(tp: Any) -> None:
    """TypeError/ValueError naming tp unless it is an int in [1, MAX_TP] (a bool refused)."""
    if isinstance(tp, bool) or not isinstance(tp, int):
        raise TypeError(f"run_on_ranks: tp must be an int in [1, {MAX_TP}], got {tp!r} ({type(tp).__name__})")
    if not 1 <= tp <= MAX_TP:
        raise ValueError(f"run_on_ranks: tp must be an int in [1, {MAX_TP}], got {tp} (a gloo world of at most "
                         f"{MAX_TP} ranks)")


def _world(tp: int, deadline: float, timeout_s: float) -> _World:
    """The live world of ``tp`` ranks owned by this process, started if there is none or one of its ranks is gone."""
    key = (os.getpid(), tp)
    world = _worlds.get(key)
    if world is not None and all(_exit_status(member.pid) is None for member in world.ranks):
        return world
    if world is not None:
        _tear_down(world)
    world = _start(tp)
    _worlds[key] = world
    try:
        port = _expect_startup(world, world.ranks[:1], deadline, timeout_s, "the store's port")[0]
        for member in world.ranks[1:]:
            member.conn.send_bytes(pickle.dumps(port))
        _expect_startup(world, world.ranks, deadline, timeout_s, "joining the world")
    except BaseException:
        _tear_down(world)
        raise
    return world


def _start(tp: int) -> _World:
    """Fork ``tp`` rank processes, each with its own pipe to this process."""
    owner = os.getpid()
    ranks: list[_Rank] = []
    try:
        for rank in range(tp):
            parent_end, child_end = Pipe(duplex=True)
            pid = os.fork()
            if pid == 0:
                _close_inherited(parent_end, ranks)
                _rank_process(rank, tp, child_end, owner)
            child_end.close()
            ranks.append(_Rank(rank, pid, parent_end))
    except BaseException:
        _tear_down(_World(tp, owner, tuple(ranks)))
        raise
    return _World(tp, owner, tuple(ranks))


def _expect_startup(world: _World, members: tuple[_Rank, ...], deadline: float, timeout_s: float,
                    step: str) -> list[Any]:
    """Each of ``members``' startup reports (its value), or a RuntimeError naming the rank that failed ``step``."""
    answers = _answers(world, members, deadline)
    for member in members:
        kind, value = answers.get(member.rank, ("missing", None))
        if kind == "missing":
            raise _stuck(world, [member.rank], timeout_s, f"while {step}")
        if kind != "ok":
            _tear_down(world)
            raise RuntimeError(f"rank {member.rank} of the gloo world of tp={world.tp} failed while {step}: {value}")
    return [answers[member.rank][1] for member in members]


def _collect(world: _World, deadline: float, timeout_s: float) -> list[Any]:
    """Every rank's result in rank order; a rank's exception re-raised with its rank noted."""
    answers = _answers(world, world.ranks, deadline)
    errors = [(rank, value) for rank, (kind, value) in sorted(answers.items()) if kind == "error"]
    missing = [member.rank for member in world.ranks if member.rank not in answers]
    if errors:
        if missing:
            _tear_down(world)
        rank, (error, text) = errors[0]
        error.add_note(f"raised on rank {rank} of the gloo world of tp={world.tp}; the rank's traceback:\n{text}")
        raise error
    if missing:
        raise _stuck(world, missing, timeout_s, "")
    return [answers[member.rank][1] for member in world.ranks]


def _answers(world: _World, members: tuple[_Rank, ...], deadline: float) -> dict[int, tuple[str, Any]]:
    """The answers ``(kind, value)`` of ``members`` by rank, waiting until ``deadline`` (or a short grace once one rank
    raised). A rank that dies first tears the world down and raises a RuntimeError naming it."""
    pending = {member.conn: member for member in members}
    answers: dict[int, tuple[str, Any]] = {}
    while pending:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        for conn in wait(list(pending), timeout=remaining):
            member = pending.pop(conn)
            try:
                answers[member.rank] = pickle.loads(conn.recv_bytes())
            except (EOFError, OSError):
                ended = _describe_exit(member.pid)
                _tear_down(world)
                raise RuntimeError(f"rank {member.rank} of the gloo world of tp={world.tp} died mid-call ({ended}); "
                                   f"the world is torn down and the next call starts a fresh one") from None
            if answers[member.rank][0] == "error":
                deadline = min(deadline, time.monotonic() + ERROR_GRACE_S)
    return answers


def _stuck(world: _World, ranks: list[int], timeout_s: float, during: str) -> RuntimeError:
    """Tear the world down; the error naming the ranks that did not answer within ``timeout_s``."""
    _tear_down(world)
    named = ", ".join(str(rank) for rank in ranks)
    which = "rank" if len(ranks) == 1 else "ranks"
    where = f" {during}" if during else ""
    return RuntimeError(f"{which} {named} of the gloo world of tp={world.tp} did not answer within {timeout_s} s"
                        f"{where}; the world is torn down and the next call starts a fresh one")


def _tear_down(world: _World) -> None:
    """Kill every rank of ``world``, reap it and drop the world from the cache."""
    if _worlds.get((world.owner, world.tp)) is world:
        del _worlds[(world.owner, world.tp)]
    if os.getpid() != world.owner:
        return
    for member in world.ranks:
        with contextlib.suppress(ProcessLookupError):
            os.kill(member.pid, signal.SIGKILL)
    for member in world.ranks:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(member.pid, 0)
        member.conn.close()


def _exit_status(pid: int) -> int | None:
    """The raw wait status of an exited child (reaping it), or None while it runs."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return -1
    return status if done else None


def _describe_exit(pid: int) -> str:
    """How a child ended, in words: its exit status or the signal that killed it (waits up to 5 s for it)."""
    status = None
    for _ in range(500):
        status = _exit_status(pid)
        if status is not None:
            break
        time.sleep(0.01)
    if status is None:
        return "its pipe closed while the process still ran"
    if status == -1:
        return "its exit status was already collected"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        return f"killed by signal {number} ({signal.Signals(number).name})"
    return f"exit status {os.WEXITSTATUS(status)}"


@atexit.register
def _tear_down_all() -> None:
    """No rank outlives the process that forked it."""
    for world in list(_worlds.values()):
        if world.owner == os.getpid():
            _tear_down(world)


# The rank side -----------------------------------------------------------------------------------------------------


def _rank_process(rank: int, tp: int, conn: Connection, owner: int) -> None:
    """The body of a forked rank: join the world, then serve commands until the pipe closes; never returns."""
    code = 0
    try:
        _die_with(owner)
        _place(rank, tp)
        _join(rank, tp, conn)
        _serve(rank, tp, conn)
    except BaseException:  # the parent names the rank from the exit status
        traceback.print_exc()
        code = 1
    finally:
        os._exit(code)


def _close_inherited(parent_end: Connection, earlier: list[_Rank]) -> None:
    """In a new rank: close the parent's ends of every pipe (this world's and the other worlds'), forget the worlds."""
    parent_end.close()
    for member in [*earlier, *(other for world in _worlds.values() for other in world.ranks)]:
        member.conn.close()
    _worlds.clear()  # the parent's worlds are not this process's to tear down


def _die_with(owner: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies; exit now if that already happened."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != owner:
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is the parent's to handle


def _place(rank: int, tp: int) -> None:
    """In a world of more ranks than the CPUs this process may run on, keep rank r on the r-th of them, round robin,
    before gloo starts its threads (they inherit it): free to migrate, such ranks took 2-3x longer per collective at tp
    4 and 8 on 2 CPUs (ci/bench/bench_tp_w2.py); a world that fits is left to the scheduler (pinned, tp 2 was slower).
    """
    cpus = sorted(os.sched_getaffinity(0))
    if tp > len(cpus):
        with contextlib.suppress(OSError):  # a placement the system refuses costs speed only
            os.sched_setaffinity(0, {cpus[rank % len(cpus)]})


def _join(rank: int, tp: int, conn: Connection) -> None:
    """Join the gloo world: rank 0 hosts the TCPStore on a free loopback port and reports it; the others get it."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    timeout = timedelta(seconds=COLLECTIVE_TIMEOUT_S)
    if rank == 0:
        store = dist.TCPStore("127.0.0.1", 0, world_size=tp, is_master=True, wait_for_workers=False, timeout=timeout)
        conn.send_bytes(pickle.dumps(("ok", store.port)))
    else:
        port = pickle.loads(conn.recv_bytes())
        store = dist.TCPStore("127.0.0.1", port, world_size=tp, is_master=False, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=tp, timeout=timeout)
    conn.send_bytes(pickle.dumps(("ok", None)))


def _serve(rank: int, tp: int, conn: Connection) -> None:
    """Run each command ``(fn, payload)`` and answer ``("ok", result)`` or ``("error", (exception, traceback))``."""
    while True:
        try:
            command = conn.recv_bytes()
        except EOFError:
            return
        try:
            fn, payload = pickle.loads(command)
            answer = tensor_pickle.dumps(("ok", fn(rank, tp, payload)))
        except Exception as error:  # noqa: BLE001 (the parent re-raises it)
            answer = _error_answer(error)
        conn.send_bytes(answer)


def _error_answer(error: Exception) -> bytes:
    """The error as the parent re-raises it; an exception that does not pickle travels as a RuntimeError."""
    text = traceback.format_exc()
    try:
        return tensor_pickle.dumps(("error", (error, text)))
    except Exception:  # noqa: BLE001
        return tensor_pickle.dumps(("error", (RuntimeError(f"{type(error).__name__}: {error}"), text)))
