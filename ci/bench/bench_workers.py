"""What the process boundary costs (issue: subjects in worker processes), measured side by side in one run.

1. Round trip of one small call through a worker (target: median under 100 µs), beside a bare socket echo
   between two processes (the machine's floor: no protocol, no Python work), measured before and after.
2. `gates run --marker cpu` of this tree against the same command at a baseline commit whose judge ran the
   subjects in its own process (default d126942), interleaved, CPU and wall time (target: at most 1.3x).

Usage: python ci/bench/bench_workers.py [--rounds N] [--baseline REF] [--skip-run]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "example_project"


def round_trip_us(calls: int) -> float:
    sys.path.insert(0, str(REPO / "src"))
    from _vllm_gates.wire.plain import encode
    from _vllm_gates.workers.worker_pool import WorkerPool, WorkerSpec

    pool = WorkerPool(WorkerSpec(EXAMPLE, (str(EXAMPLE),), ("example_row", "gates")))
    message = {"op": "call", "target": "example_row.impl:page_bytes", "anchor": None, "build": None, "build_anchor": None,
               "input": encode({"block_size": 2, "heads": 2, "head_size": 2, "dtype_bytes": 2})}
    try:
        pool.request(("bench", "impl"), message, 60)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            pool.request(("bench", "impl"), message, 60)
            times.append(time.perf_counter() - start)
    finally:
        pool.close()
    return statistics.median(times) * 1e6


_ECHO = """
import socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
while True:
    data = sock.recv(65536)
    if not data:
        break
    sock.sendall(data)
"""


def socket_floor_us(calls: int) -> float:
    """The machine's floor: one small frame to a bare echo process and back, no protocol, no Python work."""
    import socket as socketlib

    mine, theirs = socketlib.socketpair()
    echo = subprocess.Popen([sys.executable, "-c", _ECHO, str(theirs.fileno())], pass_fds=(theirs.fileno(),))
    theirs.close()
    payload = b"\0\0\0\x60" + b"x" * 96
    try:
        times = []
        for _ in range(calls + 100):
            start = time.perf_counter()
            mine.sendall(payload)
            got = 0
            while got < len(payload):
                got += len(mine.recv(65536))
            times.append(time.perf_counter() - start)
    finally:
        mine.close()
        echo.wait()
    return statistics.median(times[100:]) * 1e6


def _timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def run_ratio(rounds: int, baseline: str) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """`gates run --marker cpu` here and at ``baseline`` (a git worktree whose src/ shadows the installed engine)."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-workers-"))
    tree = workdir / "baseline"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), baseline], cwd=REPO, check=True, capture_output=True)
    try:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "cpu", "gates/rows"]
        env = {**os.environ, "CI": "true"}
        env.pop("PYTEST_ADDOPTS", None)
        old_env = {**env, "PYTHONPATH": str(tree / "src")}
        new_env = {**env, "PYTHONPATH": str(REPO / "src")}
        old, new = [], []
        for _ in range(rounds):
            wall, cpu, code = _timed(command, tree, old_env)
            old.append((wall, cpu))
            wall2, cpu2, code2 = _timed(command, REPO, new_env)
            new.append((wall2, cpu2))
            if code or code2:
                print(f"warning: exit {code} (baseline), {code2} (here)")
        return old, new
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", default="d126942")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--skip-run", action="store_true")
    args = parser.parse_args()
    missed = []
    floor, trip, floor_after = socket_floor_us(args.calls), round_trip_us(args.calls), socket_floor_us(args.calls)
    print(f"round trip, small payload: median {trip:.0f} µs over {args.calls} calls; target < 100 µs "
          f"{'met' if trip < 100 else 'MISSED'} (a bare socket echo on this machine, before and after: "
          f"{floor:.0f} and {floor_after:.0f} µs)")
    if trip >= 100:
        missed.append("round trip")
    if not args.skip_run:
        old, new = run_ratio(args.rounds, args.baseline)
        for label, index in (("wall", 0), ("cpu", 1)):
            before, after = statistics.median(x[index] for x in old), statistics.median(x[index] for x in new)
            ratio = after / before
            print(f"pytest -m cpu gates/rows, {label}: in-process {before:.1f} s, workers {after:.1f} s, "
                  f"ratio {ratio:.2f}; target <= 1.3 {'met' if ratio <= 1.3 else 'MISSED'}")
            if ratio > 1.3:
                missed.append(f"run ratio ({label})")
    print("PASS" if not missed else "MISSED: " + ", ".join(missed))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
