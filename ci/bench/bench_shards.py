"""N shards of the cpu gates on one machine, one after another (docs/evidence.md §7): each shard's wall time against
the mean (goal: the slowest within 1.25x), then `gates verdict` over the shards against the unsharded run's exit code.

The shards are balanced by the durations a first, unsharded run recorded (its --json report), as CI would balance
them by the last main run's. Exit 1 when the slowest shard exceeds 1.25x the mean or the merged verdict's exit code
differs from the unsharded run's.

With --durations F (an earlier run's --json report, e.g. the CPU job's reports/gates-cpu.json) the shards are
balanced by it and no unsharded run is made here: the merged verdict's exit code is printed, not compared.

Usage: python ci/bench/bench_shards.py [--shards N] [--marker cpu] [--durations F] [ROW ...]   (from the repository root)
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET = 1.25


def gates(*args: str) -> tuple[int, float]:
    """`gates ARGS` from the repository root: its exit status and wall seconds."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "_vllm_gates.frontends.cli", *args], cwd=REPO, capture_output=True, text=True)
    if done.returncode == 2:
        sys.stderr.write(done.stderr)
    return done.returncode, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="*")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--marker", default="cpu")
    parser.add_argument("--durations", type=Path, metavar="F", help="balance by this report; run no unsharded run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-shards-") as folder:
        out = Path(folder)
        durations = args.durations.resolve() if args.durations else out / "whole.json"
        whole_code, whole_s = (None, 0.0) if args.durations else \
            gates("run", *args.rows, "--marker", args.marker, "--json", str(durations))
        print(f"unsharded: exit {whole_code}, {whole_s:.1f}s" if whole_code is not None else f"balanced by {durations}")
        times, evidence = [], []
        for index in range(1, args.shards + 1):
            report = out / f"shard-{index}.json"
            code, seconds = gates("run", *args.rows, "--marker", args.marker, "--shard", f"{index}/{args.shards}",
                                  "--shard-durations", str(durations), "--json", str(report))
            planned = json.loads(report.read_text(encoding="utf-8"))["meta"]["shard"]["plan"][index - 1]
            print(f"shard {index}/{args.shards}: exit {code}, {seconds:.1f}s, {len(planned)} groups, "
                  f"planned {sum(group['weight'] for group in planned):.1f}s of recorded item time")
            times.append(seconds)
            evidence += ["--evidence", str(report)]
        merged_code, _ = gates("verdict", *evidence)
    mean = sum(times) / len(times)
    ratio = max(times) / mean
    print(f"slowest shard {max(times):.1f}s = {ratio:.2f}x the mean {mean:.1f}s (goal <= {TARGET}x); "
          f"sum of shards {sum(times):.1f}s" + (f" against {whole_s:.1f}s unsharded" if whole_code is not None else ""))
    print(f"gates verdict over the shards: exit {merged_code}; unsharded run: exit {whole_code}")
    return 0 if ratio <= TARGET and (whole_code is None or merged_code == whole_code) else 1


if __name__ == "__main__":
    sys.exit(main())
