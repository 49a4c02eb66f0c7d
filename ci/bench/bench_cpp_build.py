"""The C++ driver's clean build (drivers/cpp), fast build against one object per file, side by side (issue 15: CI).

Configures and builds drivers/cpp from scratch in two fresh folders per round, alternating which goes first:
``-DVLLM_GATES_FAST_BUILD=ON`` (the default: unity batches of 8 with precompiled common headers) and ``OFF``
(one object per source file). Reports the compiler's CPU time (the children's user + system time, which other
load on a shared machine disturbs less than wall time) and the wall time of each, and their ratios; checks that
both drivers answer the Python port's recorded replies alike (drivers/cpp/tools/golden.py). Exit 1 when the fast
build's CPU time is above TARGET of the other's, or the two drivers answer differently.

Usage: python ci/bench/bench_cpp_build.py [--rounds N] [--jobs J]
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
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET = 0.5  # the fast build must take at most half the compiler CPU time of one object per file


@dataclass(frozen=True)
class Build:
    """One clean build: the compiler's CPU seconds, the wall seconds, and the driver it produced."""

    cpu: float
    wall: float
    driver: Path


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def clean_build(folder: Path, fast: bool, jobs: int) -> Build:
    """Configure and build drivers/cpp into an empty ``folder``; CalledProcessError when either step fails."""
    flag = f"-DVLLM_GATES_FAST_BUILD={'ON' if fast else 'OFF'}"
    cpu, wall = _children_cpu(), time.perf_counter()
    for step in (["cmake", "-S", str(REPO / "drivers" / "cpp"), "-B", str(folder), "-DCMAKE_BUILD_TYPE=Release", flag],
                 ["cmake", "--build", str(folder), f"-j{jobs}"]):
        subprocess.run(step, check=True, stdout=subprocess.DEVNULL)
    return Build(_children_cpu() - cpu, time.perf_counter() - wall, folder / "vllm-gates-cpp")


def golden_answers(driver: Path, golden: Path) -> str:
    """What drivers/cpp/tools/golden.py says of a driver's replies to the Python port's recorded ones."""
    done = subprocess.run([sys.executable, str(REPO / "drivers" / "cpp" / "tools" / "golden.py"), "check", str(driver),
                           str(golden)], cwd=REPO, capture_output=True, text=True)
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else f"exit {done.returncode}: {done.stderr[-300:]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="clean builds of each kind (default 1)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="make -j (default: the cores)")
    args = parser.parse_args()
    if args.rounds < 1 or args.jobs < 1:
        parser.error("--rounds and --jobs must be >= 1")
    runs: dict[bool, list[Build]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="bench-cpp-build-") as tmp:
        for round_ in range(args.rounds):
            for fast in ((True, False) if round_ % 2 == 0 else (False, True)):
                build = clean_build(Path(tmp) / f"{'fast' if fast else 'plain'}-{round_}", fast, args.jobs)
                runs[fast].append(build)
                print(f"round {round_ + 1}: {'fast build' if fast else 'one object per file'}: "
                      f"{build.cpu:.1f} s CPU, {build.wall:.1f} s wall", flush=True)
        golden = Path(tmp) / "golden.jsonl"
        with golden.open("w") as out:
            subprocess.run([sys.executable, str(REPO / "drivers" / "cpp" / "tools" / "golden.py"), "dump",
                            "BACKEND-DISTRIBUTED-TP", "CAPI-ABI"], cwd=REPO, stdout=out, check=True)
        answers = {fast: golden_answers(builds[-1].driver, golden) for fast, builds in runs.items()}
        same = answers[True] == answers[False]
    cpu = {fast: statistics.median(b.cpu for b in builds) for fast, builds in runs.items()}
    wall = {fast: statistics.median(b.wall for b in builds) for fast, builds in runs.items()}
    ratio = cpu[True] / cpu[False]
    print(f"compiler CPU time, fast / one object per file: {ratio:.2f} (target <= {TARGET}) "
          f"{'ok' if ratio <= TARGET else 'MISSED'}; wall time {wall[True] / wall[False]:.2f} at -j{args.jobs}")
    print(f"golden replies (TP, CAPI-ABI): fast build {answers[True]!r}, one object per file {answers[False]!r}: "
          f"{'the same' if same else 'DIFFERENT'}")
    return 0 if ratio <= TARGET and same else 1


if __name__ == "__main__":
    sys.exit(main())
