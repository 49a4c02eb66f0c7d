"""kv-plan start-up target (issue 14), measured side by side in one run and printed as a ratio.

Target: the median whole-process time of ``python -m impl.entrypoints.kv_plan --model-config <fixture> --json``
is under 0.5 s. Beside it, in the same interleaved rounds, ``python -c pass`` shows what any Python process
costs on this machine; the ratio of the two medians is printed too. Each kv-plan run must exit 0 and print
JSON, and must not import torch (checked once, with ``-X importtime``).

Exit status 1 when the target is missed (or a run fails). Run: python ci/bench/bench_kv_plan.py [--rounds N]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "gates" / "rows" / "road_v1_mem" / "fixtures" / "models" / "qwen3-next-80b-a3b.json"
TARGET_S = 0.5
KV_PLAN = [sys.executable, "-m", "impl.entrypoints.kv_plan", "--model-config", str(FIXTURE), "--json"]
BARE = [sys.executable, "-c", "pass"]


def timed(command: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Wall-clock seconds of one whole process run from the repository root, and what it did."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    return time.perf_counter() - start, done


def check_kv_plan_run(done: subprocess.CompletedProcess[str]) -> None:
    """A kv-plan run that counts: exit 0 and a JSON plan on stdout."""
    if done.returncode != 0:
        sys.exit(f"kv-plan exited {done.returncode}: {done.stderr.strip()}")
    json.loads(done.stdout)


def imports_torch() -> bool:
    """Whether kv-plan's process imports torch (``-X importtime`` lists every module imported)."""
    _, done = timed([sys.executable, "-X", "importtime", *KV_PLAN[1:]])
    check_kv_plan_run(done)
    return any(line.split("|")[-1].strip() == "torch" for line in done.stderr.splitlines())


def measure(rounds: int) -> tuple[list[float], list[float]]:
    """Interleaved rounds of (kv-plan, python -c pass), one warm-up round first."""
    plan_times, bare_times = [], []
    for index in range(rounds + 1):
        plan_s, done = timed(KV_PLAN)
        check_kv_plan_run(done)
        bare_s, _ = timed(BARE)
        if index:
            plan_times.append(plan_s)
            bare_times.append(bare_s)
    return plan_times, bare_times


def main(argv: list[str] | None = None) -> int:
    """Print both medians, their ratio and the target, met or MISSED; 1 when missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default: 15)")
    args = parser.parse_args(argv)
    torch_loaded = imports_torch()
    plan_times, bare_times = measure(args.rounds)
    plan_s, bare_s = statistics.median(plan_times), statistics.median(bare_times)
    met = plan_s < TARGET_S and not torch_loaded
    print(f"kv-plan --model-config {FIXTURE.name} --json: median {plan_s * 1000:.1f} ms "
          f"(min {min(plan_times) * 1000:.1f}, max {max(plan_times) * 1000:.1f}) over {args.rounds} rounds")
    print(f"python -c pass:                              median {bare_s * 1000:.1f} ms "
          f"(min {min(bare_times) * 1000:.1f}, max {max(bare_times) * 1000:.1f})")
    print(f"ratio kv-plan / python -c pass: {plan_s / bare_s:.2f}x; torch imported: {'yes' if torch_loaded else 'no'}")
    print(f"target: median < {TARGET_S} s without torch: {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
