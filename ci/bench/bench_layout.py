"""TP-W1 layout speed targets (issue 4), measured side by side in one run and printed as ratios.

1. Every group table (tp, dcp, pcp, pp, dp, ep) of a 2^20-rank world, EDP64 x DP64 x PP8 x PCP4 x TP8:
   the impl's ``group_ranks`` takes at most 0.5x the torch oracle's time and at most 1.5x a numpy
   ``transpose(...).reshape(...).tolist()`` floor, and at most 1.5x the list-slice floor: each table's groups cut as
   consecutive slices of one shared ranks list, the least pure Python can do to hand out the same lists. Builds are timed with the garbage collector off (at 2^20 ranks
   it is most of a build's time); what the collector adds to the impl's build is reported separately.
2. ``rank_group`` has a median under 5 us per call at 2^10 and at 2^20 ranks, for every kind, in thread CPU time.

Rounds interleave the table builders; each figure is the median over rounds. Exit status 1 when a target is
missed. Run: python ci/bench/bench_layout.py [--rounds N]
"""
from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402  (after the path set-up)

from impl.distributed.parallel_layout import GROUP_KINDS, ParallelDims, _all_ranks, group_ranks, rank_group  # noqa: E402
from oracles.layout import vllm_group_tables  # noqa: E402

BIG = {"external_dp": 64, "dp": 64, "pp": 8, "pcp": 4, "tp": 8}
SMALL = {"external_dp": 4, "dp": 4, "pp": 4, "pcp": 2, "tp": 8}
TABLE_VS_ORACLE, TABLE_VS_NUMPY, TABLE_VS_SLICES, RANK_GROUP_US = 0.5, 1.5, 1.5, 5.0


def impl_tables(dims: dict[str, int]) -> dict[str, list[list[int]]]:
    """All six tables, as a caller builds them: the six kinds share one ranks list, made afresh for each build."""
    _all_ranks.cache_clear()
    parallel = ParallelDims(**dims)
    return {kind: group_ranks(parallel, kind) for kind in GROUP_KINDS}


def numpy_tables(dims: dict[str, int]) -> dict[str, list[list[int]]]:
    """The floor: one transpose + reshape + tolist per kind."""
    edp, dp, pp, pcp, tp = (dims[k] for k in ("external_dp", "dp", "pp", "pcp", "tp"))
    dcp = dims.get("dcp", 1)
    ranks = np.arange(edp * dp * pp * pcp * tp).reshape(edp, dp, pp, pcp, tp)
    return {
        "tp": ranks.reshape(-1, tp).tolist(),
        "dcp": ranks.reshape(-1, dcp).tolist(),
        "pcp": ranks.transpose(0, 1, 2, 4, 3).reshape(-1, pcp).tolist(),
        "pp": ranks.transpose(0, 1, 4, 3, 2).reshape(-1, pp).tolist(),
        "dp": ranks.transpose(0, 4, 2, 3, 1).reshape(-1, dp).tolist(),
        "ep": ranks.transpose(0, 2, 1, 3, 4).reshape(-1, dp * pcp * tp).tolist(),
    }


def slice_floor_tables(dims: dict[str, int], shape: dict[str, tuple[int, int]]) -> dict[str, list[list[int]]]:
    """The list-slice floor: every kind's groups (``shape``: kind -> (groups, length)) as consecutive slices of one
    ranks list; the same number of lists of the same lengths as the impl's, without its strides or its order."""
    ranks = list(range(ParallelDims(**dims).world_size))
    return {kind: [ranks[s : s + length] for s in range(0, groups * length, length)] for kind, (groups, length) in shape.items()}


def timed(build: Callable[[], Any], collector: bool = False) -> float:
    """Seconds for one build, with the previous result already freed; the garbage collector off unless asked."""
    gc.collect()
    if not collector:
        gc.disable()
    try:
        start = time.perf_counter()
        result = build()
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    del result
    return elapsed


def rank_group_medians(dims: dict[str, int], calls: int = 2000, batches: int = 15) -> dict[str, float]:
    """Median microseconds per rank_group call, per kind, over batches of random ranks."""
    parallel = ParallelDims(**dims)
    rng = random.Random(0)
    ranks = [rng.randrange(parallel.world_size) for _ in range(calls)]
    medians = {}
    for kind in GROUP_KINDS:
        per_call = []
        for _ in range(batches):
            start = time.thread_time()
            for rank in ranks:
                rank_group(parallel, rank, kind)
            per_call.append((time.thread_time() - start) / calls * 1e6)
        medians[kind] = statistics.median(per_call)
    return medians


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the three table builders")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")

    oracle_sizes = {k: BIG[k] for k in ("tp", "pcp", "pp", "dp", "external_dp")}
    world = ParallelDims(**BIG).world_size
    reference = impl_tables(BIG)
    shape = {kind: (len(groups), len(groups[0])) for kind, groups in reference.items()}
    builders = {"impl": lambda: impl_tables(BIG), "torch oracle": lambda: vllm_group_tables(**oracle_sizes),
                "numpy floor": lambda: numpy_tables(BIG), "list-slice floor": lambda: slice_floor_tables(BIG, shape)}
    floor = builders["list-slice floor"]()
    if {kind: (len(g), len(g[0])) for kind, g in floor.items()} != shape or sorted(map(len, floor["ep"])) != sorted(map(len, reference["ep"])):
        print("FAIL: the list-slice floor does not hand out the impl's number and lengths of lists")
        return 1
    del floor
    for name in ("torch oracle", "numpy floor"):
        if builders[name]() != reference:
            print(f"FAIL: the {name} tables differ from the impl's")
            return 1
    del reference
    times: dict[str, list[float]] = {name: [] for name in builders}
    with_gc: list[float] = []
    for _ in range(args.rounds):
        for name, build in builders.items():
            times[name].append(timed(build))
        with_gc.append(timed(builders["impl"], collector=True))
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"group tables, all six kinds, world {world} (EDP64 x DP64 x PP8 x PCP4 x TP8), median of {args.rounds} rounds, "
          "garbage collector off:")
    for name, seconds in median.items():
        print(f"  {name:<16} {seconds * 1e3:9.1f} ms")
    print(f"  (the impl with the collector on: {statistics.median(with_gc) * 1e3:.1f} ms; the collector adds "
          f"{(statistics.median(with_gc) - median['impl']) * 1e3:.1f} ms)")
    vs_oracle = median["impl"] / median["torch oracle"]
    vs_numpy = median["impl"] / median["numpy floor"]
    vs_slices = median["impl"] / median["list-slice floor"]
    ok = True
    for label, ratio, limit in (("impl / torch oracle", vs_oracle, TABLE_VS_ORACLE), ("impl / numpy floor", vs_numpy, TABLE_VS_NUMPY),
                                ("impl / list-slice floor", vs_slices, TABLE_VS_SLICES)):
        passed = ratio <= limit
        ok &= passed
        print(f"  {label:<24} {ratio:6.3f}  (target <= {limit})  {'ok' if passed else 'MISSED'}")

    print(f"rank_group median per call (target < {RANK_GROUP_US} us):")
    for dims in (SMALL, BIG):
        medians = rank_group_medians(dims)
        size = ParallelDims(**dims).world_size
        worst = max(medians.values())
        passed = worst < RANK_GROUP_US
        ok &= passed
        shown = "  ".join(f"{kind} {us:.2f}" for kind, us in medians.items())
        print(f"  world {size:>8}: {shown}  (us; worst {worst:.2f})  {'ok' if passed else 'MISSED'}")
    print("all targets met" if ok else "a target was MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
