"""Oracle for TP-3.1: a real torch.distributed gloo world on loopback creates every group and runs collectives.

A different derivation: the groups come from vLLM's torch reshape/transpose algorithm (oracles.layout, after
vllm/distributed/parallel_state.py) and the members, ranks and sums from gloo, not from the impl's strides.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any, Mapping, Sequence

from oracles.layout import vllm_group_tables

Dims = Mapping[str, int]
Tables = Mapping[str, Sequence[Sequence[int]]]
_ROOT = Path(__file__).resolve().parent.parent


def _derive_tables(world_size: int, layouts: Sequence[Dims]) -> list[dict[str, list[list[int]]]]:
    """Per layout, every kind's groups in vLLM's creation order, by the torch algorithm of oracles.layout."""
    if type(world_size) is not int or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if not layouts:
        raise ValueError("layouts must hold at least one layout")
    tables = [vllm_group_tables(**dims) for dims in layouts]
    _check_tables(world_size, tables)
    return tables


def _check_tables(world_size: int, per_layout: Sequence[Tables]) -> None:
    """Each kind's table must split ``range(world_size)`` into disjoint groups."""
    for number, tables in enumerate(per_layout):
        for kind, groups in tables.items():
            seen = sorted(rank for group in groups for rank in group)
            if seen != list(range(world_size)):
                raise ValueError(f"layout {number}: the {kind} groups {groups} do not split ranks 0..{world_size - 1}")


def _observe_layout(rank: int, tables: Tables) -> dict[str, list[Any]]:
    """Create every group of ``tables`` in order (all ranks do); report this rank's group as gloo sees it."""
    import torch
    import torch.distributed as dist

    observed: dict[str, list[Any]] = {}
    for kind, groups in tables.items():
        mine = None
        for members in groups:
            group = dist.new_group(ranks=list(members), backend="gloo")
            if rank in members:
                mine = group
        total = torch.tensor([rank], dtype=torch.int64)
        dist.all_reduce(total, group=mine)
        gathered = [torch.zeros(1, dtype=torch.int64) for _ in range(dist.get_world_size(mine))]
        dist.all_gather(gathered, torch.tensor([rank], dtype=torch.int64), group=mine)
        observed[kind] = [[int(t.item()) for t in gathered], dist.get_rank(mine), int(total.item())]
    return observed


def _rank_main(rank: int, config: Mapping[str, Any], out_path: str) -> None:
    """One process of the world: join through the parent's store, observe every layout, write JSON."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    timeout = timedelta(seconds=config["timeout_s"])
    store = dist.TCPStore("127.0.0.1", config["port"], is_master=False, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=config["world_size"], timeout=timeout)
    try:
        observed = [_observe_layout(rank, tables) for tables in config["tables"]]
        dist.barrier()
    finally:
        dist.destroy_process_group()
    Path(out_path).write_text(json.dumps(observed))


def _launch(workdir: str) -> None:
    """Import torch once, then fork one process per rank; if a rank fails, kill the others and exit 1."""
    import torch.distributed  # noqa: F401  (imported before forking so the ranks share it)

    config = json.loads(Path(workdir, "config.json").read_text())
    children: dict[int, int] = {}
    failed = None
    try:
        for rank in range(config["world_size"]):
            pid = os.fork()
            if pid == 0:
                _rank_process(rank, config, workdir)
            children[pid] = rank
        while children:
            pid, status = os.wait()
            rank = children.pop(pid)
            if status != 0 and failed is None:
                failed = rank
                for other in children:
                    os.kill(other, signal.SIGKILL)
    finally:  # on any error here, no rank outlives the launcher
        for pid in children:
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
    if failed is not None:
        print(f"rank {failed} failed", file=sys.stderr)
        sys.exit(1)


def _rank_process(rank: int, config: Mapping[str, Any], workdir: str) -> None:
    """The body of a forked rank: output to its own log, exit status 0 only when it reported."""
    code = 1
    try:
        with open(Path(workdir, f"rank{rank}.log"), "w") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            _rank_main(rank, config, str(Path(workdir, f"rank{rank}.json")))
            code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def observe_gloo_world(world_size: int, layouts: Sequence[Dims], timeout_s: float = 120.0) -> list[list[dict]]:
    """Run ``world_size`` gloo processes over the groups that vLLM's algorithm derives from each layout's sizes.

    A layout is plain ints ``{tp, pcp, pp, dp, external_dp, dcp}`` (absent ones are 1); every rank creates
    every kind's groups in the order tp, dcp, pcp, pp, dp, ep. Returns ``observed[layout][rank][kind] = [members by group rank (all_gather), rank in group, all_reduce
    sum of rank ids]``. Raises TimeoutError past ``timeout_s``; no process outlives the call (the ranks
    run in their own session, which is killed as a whole).
    """
    tables = _derive_tables(world_size, layouts)
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=timeout_s))
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory(prefix="gloo-world-") as tmp:
        Path(tmp, "config.json").write_text(
            json.dumps({"port": store.port, "world_size": world_size, "timeout_s": timeout_s, "tables": tables})
        )
        launcher = subprocess.Popen(
            [sys.executable, "-c", f"from oracles.collectives import _launch; _launch({tmp!r})"],
            cwd=_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            _, err = launcher.communicate(timeout=timeout_s)
        except BaseException as exc:  # timeout or interrupt: the launcher is not reaped yet, so its session is ours
            with contextlib.suppress(ProcessLookupError):
                os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise TimeoutError(f"gloo world of {world_size} ranks ran past {timeout_s} s") from None
            raise
        if launcher.returncode != 0:
            logs = "\n".join(f"--- rank {r} ---\n{Path(tmp, f'rank{r}.log').read_text()[-3000:]}"
                             for r in range(world_size) if Path(tmp, f"rank{r}.log").exists())
            raise RuntimeError(f"gloo world failed (exit {launcher.returncode}): {err.decode()[-2000:]}\n{logs}")
        by_rank = [json.loads(Path(tmp, f"rank{rank}.json").read_text()) for rank in range(world_size)]
    return [[by_rank[rank][number] for rank in range(world_size)] for number in range(len(layouts))]
