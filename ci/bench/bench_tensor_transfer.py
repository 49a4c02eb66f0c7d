"""What a big tensor costs through the worker protocol (issue 29 item 6a), measured side by side in one run.

1. A judge <-> worker round trip of a 256 MiB float32 tensor: the judge encodes it as a call's input, the worker
   decodes it and returns it, the judge decodes the reply (two transfers, every protocol step of both sides).
2. The floor: the same bytes to a bare echo process over a socketpair and back (no protocol, no numpy).
The ratio of the medians is the target: at most 2x. A tensor of more than one frame (MAX_FRAME is 256 MiB of JSON)
needs nothing more: its elements never enter the JSON body.

Usage: python ci/bench/bench_tensor_transfer.py [--mib N] [--rounds N]
"""
from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GOAL = 2.0

_ECHO = """
import socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
size = int(sys.argv[2])
while True:
    data = bytearray(size)
    view, filled = memoryview(data), 0
    while filled < size:
        got = sock.recv_into(view[filled:])
        if not got:
            sys.exit(0)
        filled += got
    sock.sendall(data)
"""


def _receive_into(sock: socket.socket, size: int) -> bytearray:
    data = bytearray(size)
    view, filled = memoryview(data), 0
    while filled < size:
        got = sock.recv_into(view[filled:])
        if not got:
            raise SystemExit("the echo process closed the channel")
        filled += got
    return data


def floor_s(payload: bytes, rounds: int) -> list[float]:
    """The same bytes to a bare echo process and back: written from one buffer, read into one, as the protocol does."""
    mine, theirs = socket.socketpair()
    process = subprocess.Popen([sys.executable, "-c", _ECHO, str(theirs.fileno()), str(len(payload))],
                               pass_fds=(theirs.fileno(),))
    theirs.close()
    times = []
    try:
        for _ in range(rounds + 1):
            start = time.perf_counter()
            writer = threading.Thread(target=mine.sendall, args=(payload,))
            writer.start()
            back = _receive_into(mine, len(payload))
            writer.join()
            times.append(time.perf_counter() - start)
            assert len(back) == len(payload)
    finally:
        mine.close()
        process.wait(30)
    return times[1:]


def worker_s(array, rounds: int) -> list[float]:
    """The tensor as a call's input to a Python worker whose target returns it, and the reply decoded, timed whole."""
    sys.path.insert(0, str(REPO / "src"))
    import numpy

    from _vllm_gates.run.checks import _outcome_of
    from _vllm_gates.wire.plain import encode
    from _vllm_gates.workers.worker_pool import WorkerPool, WorkerSpec

    with tempfile.TemporaryDirectory(prefix="bench-tensor-") as folder:
        root = Path(folder)
        (root / "pkg").mkdir()
        (root / "pkg" / "__init__.py").write_text("")
        (root / "pkg" / "echo.py").write_text("def same(x):\n    return x\n")
        pool = WorkerPool(WorkerSpec(root, (str(root),), ("pkg",)))
        key = ("bench", "impl")
        times = []
        try:
            for _ in range(rounds + 1):
                start = time.perf_counter()
                message = {"op": "call", "target": "pkg.echo:same", "anchor": None, "build": None, "build_anchor": None,
                           "input": encode(array, "input")}
                raw = pool.exchange_raw({key: message}, 600)[key]
                got = _outcome_of(pool.parse(key, raw)["result"], buffers=raw.buffers).value
                times.append(time.perf_counter() - start)
                assert got.dtype == numpy.float32 and got.shape == array.shape and not got.flags.writeable
        finally:
            pool.close()
    return times[1:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="the tensor's size in MiB (default 256)")
    parser.add_argument("--rounds", type=int, default=5, help="timed round trips of each (after one warm-up)")
    args = parser.parse_args()
    import numpy

    array = numpy.arange(args.mib * (1 << 20) // 4, dtype=numpy.float32)
    payload = array.tobytes()
    floor = floor_s(payload, args.rounds)
    worker = worker_s(array, args.rounds)
    ratio = statistics.median(worker) / statistics.median(floor)
    print(f"{args.mib} MiB float32 round trip, median of {args.rounds}:")
    print(f"  bare socketpair echo (the floor):     {statistics.median(floor) * 1e3:8.1f} ms  "
          f"({2 * args.mib / statistics.median(floor) / 1024:.2f} GiB/s both ways)")
    print(f"  judge <-> worker, protocol version 2: {statistics.median(worker) * 1e3:8.1f} ms  "
          f"({2 * args.mib / statistics.median(worker) / 1024:.2f} GiB/s both ways)")
    met = ratio <= GOAL
    print(f"  ratio {ratio:.2f}x (target <= {GOAL:g}x): {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
