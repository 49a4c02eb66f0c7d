"""TP-W2 speed against its floor (issue 30 "Speed"; README, ci/bench): >= 1,000 generated layer configurations
(column, row, qkv, MLP, vocab embedding, lm_head; tp in {1, 2, 4, 8}) timed three ways on the same configurations,
side by side in one run:

- unsharded: the same forwards in this process (one thread, as each rank runs);
- the floor (ci/bench/tp_floor.py): the per-rank forwards with their collectives on the same gloo worlds of
  impl/distributed/gloo_world.py, nothing moved per call: tensors in shared memory, one wake per batch;
- the harness: one run_on_ranks call per batch, as the gates call it (the batch pickled to every rank over its pipe,
  the results pickled back). Every configuration still runs its own collectives.

Every rank's result, the harness's and the floor's, is checked against the unsharded forward (float32,
torch.testing.assert_close's defaults). Targets: the whole run within 120 s on a 2-core machine, the harness within
4x the unsharded forwards. Beside them, what bounds the floor: each tp's collectives replayed alone on its world.
Rounds run the floor first and the harness first in turn; each figure is its median over rounds. Exit status 1 when
a target is missed. Run: python ci/bench/bench_tp_w2.py [--configs N] [--batch B] [--rounds R]
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402  (after the path set-up)

import tp_floor  # noqa: E402

from impl.distributed.gloo_world import run_on_ranks  # noqa: E402
from impl.model_executor.layers import tp_operations as ops  # noqa: E402

TPS = (1, 2, 4, 8)
TOTAL_S, RATIO = 120.0, 4.0
Config = tuple[str, dict[str, Any]]


def _normal(gen: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=gen) * scale


def _config(kind: str, tp: int, gen: torch.Generator) -> Config:
    """One configuration: a geometry drawn for ``kind`` at ``tp``, its tensors, as the operation's checked payload."""
    def size(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (1,), generator=gen))

    tokens, hidden = size(1, 8), size(8, 64)
    x = _normal(gen, tokens, hidden)
    if kind == "column":
        out = tp * size(1, 16)
        return kind, ops.column_payload(x, _normal(gen, out, hidden, scale=hidden ** -0.5), _normal(gen, out), tp, False)
    if kind == "row":
        inputs = tp * size(1, 16)
        return kind, ops.row_payload(_normal(gen, tokens, inputs), _normal(gen, hidden, inputs, scale=inputs ** -0.5),
                                     _normal(gen, hidden), tp)
    if kind == "qkv":
        kv = [1, 2, 4, 8][size(0, 3)]
        heads, dim = math.lcm(kv, tp) * size(1, 2), size(2, 8)
        weights = [_normal(gen, n * dim, hidden, scale=hidden ** -0.5) for n in (heads, kv, kv)]
        return kind, ops.qkv_payload(x, *weights, None, None, None, heads, kv, dim, tp)
    if kind == "mlp":
        ffn = tp * size(1, 16)
        return kind, ops.mlp_payload(x, _normal(gen, ffn, hidden, scale=hidden ** -0.5),
                                     _normal(gen, ffn, hidden, scale=hidden ** -0.5),
                                     _normal(gen, hidden, ffn, scale=ffn ** -0.5), tp)
    vocab = size(1, 300)
    if kind == "embedding":
        return kind, ops.embedding_payload(torch.randint(0, vocab, (tokens,), generator=gen), _normal(gen, vocab, hidden), tp)
    return kind, ops.lm_head_payload(x, _normal(gen, vocab, hidden, scale=hidden ** -0.5), tp)


RANK_FORWARD: dict[str, Callable[[int, int, dict[str, Any]], Any]] = {
    "column": ops.column_rank, "row": ops.row_rank, "qkv": ops.qkv_rank, "mlp": ops.mlp_rank,
    "embedding": ops.embedding_rank, "lm_head": ops.lm_head_rank}


def run_batch(rank: int, tp: int, configs: list[Config]) -> list[Any]:
    """On every rank: each configuration's forward, in order (its collectives included)."""
    return [RANK_FORWARD[kind](rank, tp, payload) for kind, payload in configs]


def _check(kind: str, per_rank: list[Any], whole: Any) -> None:
    """The ranks' results against the unsharded forward (columns and query heads concatenated in rank order)."""
    if kind == "column":
        torch.testing.assert_close(torch.cat(per_rank, dim=-1), whole)
    elif kind == "qkv":
        torch.testing.assert_close(torch.cat([q for q, _, _ in per_rank], dim=-1), whole[0])
    else:
        for result in per_rank:
            torch.testing.assert_close(result, whole)


@dataclass(frozen=True)
class Timing:
    """One tp's seconds: unsharded, floor, harness, and its collectives replayed alone (with their count)."""

    unsharded: float
    floor: float
    harness: float
    alone: float
    collectives: int


def _timed_tp(tp: int, configs: list[Config], batches: list[tp_floor.Batch], floor_first: bool) -> Timing:
    """The floor's pass and the harness's (with the unsharded forwards batch by batch) in the order given, then the
    collectives alone; every result checked."""
    if floor_first:
        floor_s, floor_results = tp_floor.run_floor(tp, batches, timeout_s=600)
    harness_s = unsharded_s = 0.0
    harness_results: list[list[Any]] = []
    for start, stop in batches:
        batch = configs[start:stop]
        t0 = time.perf_counter()
        by_rank = run_on_ranks(tp, run_batch, batch, timeout_s=120)
        t1 = time.perf_counter()
        run_batch(0, 1, batch)  # the same forwards, unsharded, in this process
        unsharded_s += time.perf_counter() - t1
        harness_s += t1 - t0
        harness_results += [[by_rank[rank][number] for rank in range(tp)] for number in range(len(batch))]
    if not floor_first:
        floor_s, floor_results = tp_floor.run_floor(tp, batches, timeout_s=600)
    whole = run_batch(0, 1, configs)
    for (kind, _), by_harness, by_floor, expected in zip(configs, harness_results, floor_results, whole):
        _check(kind, by_harness, expected)
        _check(kind, by_floor, expected)
    counted = run_on_ranks(tp, tp_floor.collectives_alone, None, timeout_s=600)
    return Timing(unsharded_s, floor_s, harness_s, max(seconds for _, seconds in counted), counted[0][0])


def _median(timings: list[Timing]) -> Timing:
    """Each figure's median over rounds (the collectives' count is the same in every round)."""
    return Timing(*(statistics.median(getattr(timing, field) for timing in timings)
                    for field in ("unsharded", "floor", "harness", "alone")), timings[0].collectives)


COLUMNS = ("unsharded", "floor", "harness", "floor/unsharded", "harness/unsharded", "harness/floor",
           "collectives alone")


def _row(label: str, timing: Timing) -> str:
    """One line of the table: the three times, their three ratios, the collectives alone."""
    alone = f"{timing.alone:.2f} s ({timing.collectives} calls" + (
        f", {1e3 * timing.alone / timing.collectives:.2f} ms each)" if timing.collectives else ")")
    cells = (f"{timing.unsharded:.3f} s", f"{timing.floor:.2f} s", f"{timing.harness:.2f} s",
             f"{timing.floor / timing.unsharded:.1f}x", f"{timing.harness / timing.unsharded:.1f}x",
             f"{timing.harness / timing.floor:.2f}x", alone)
    return f"{label:<5}" + "".join(f"  {cell:>{max(len(name), 9)}}" for cell, name in zip(cells[:-1], COLUMNS)) + \
        f"  {cells[-1]}"


def main(argv: list[str] | None = None) -> int:
    """Print each tp's times and ratios, the targets met or MISSED and what bounds the harness; 1 when missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=1008, help="configurations in all (default 1008)")
    parser.add_argument("--batch", type=int, default=21, help="configurations per run_on_ranks call and per wake of "
                                                              "the floor (default 21)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the floor first and the harness first in turn; "
                                                              "each figure the median (default 3)")
    args = parser.parse_args(argv)
    if args.configs < len(TPS) or args.batch < 1 or args.rounds < 1:
        parser.error(f"--configs must be >= {len(TPS)}, --batch and --rounds >= 1, got --configs {args.configs} "
                     f"--batch {args.batch} --rounds {args.rounds}")
    torch.set_num_threads(1)  # as every rank runs: one thread each
    started, load_before = time.perf_counter(), os.getloadavg()
    gen = torch.Generator().manual_seed(30)
    kinds = tuple(RANK_FORWARD)
    per_tp = -(-args.configs // len(TPS))
    configs = {tp: [_config(kinds[i % len(kinds)], tp, gen) for i in range(per_tp)] for tp in TPS}
    for tp in TPS:  # before the worlds fork: their ranks inherit the floor's shared memory
        tp_floor.prepare(tp, configs[tp], RANK_FORWARD, run_batch(0, 1, configs[tp]))
    world_s = time.perf_counter()
    for tp in TPS:
        run_on_ranks(tp, run_batch, [])
    world_s = time.perf_counter() - world_s
    batches = [(start, min(start + args.batch, per_tp)) for start in range(0, per_tp, args.batch)]
    rounds = [{tp: _timed_tp(tp, configs[tp], batches, floor_first=number % 2 == 0) for tp in TPS}
              for number in range(args.rounds)]
    by_tp = {tp: _median([timings[tp] for timings in rounds]) for tp in TPS}
    total = Timing(*(sum(getattr(timing, field) for timing in by_tp.values())
                     for field in ("unsharded", "floor", "harness", "alone", "collectives")))
    total_s, load_after = time.perf_counter() - started, os.getloadavg()
    ratio = total.harness / total.unsharded
    print(f"{per_tp * len(TPS)} configurations ({per_tp} at each tp of {', '.join(map(str, TPS))}; {args.batch} a "
          f"batch); every rank's result, the harness's and the floor's, checked against the unsharded forward; "
          f"each time the median of {args.rounds} rounds")
    print(f"{os.cpu_count()} CPUs; load average (1, 5, 15 min) {' '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{' '.join(f'{x:.2f}' for x in load_after)} after")
    print(f"{'':<5}" + "".join(f"  {name:>{max(len(name), 9)}}" for name in COLUMNS[:-1]) + f"  {COLUMNS[-1]}")
    for tp, timing in by_tp.items():
        print(_row(f"tp {tp}", timing))
    print(_row("all", total))
    print(f"worlds started once: {world_s:.2f} s; total {total_s:.1f} s (target <= {TOTAL_S:.0f} s): "
          f"{'met' if total_s <= TOTAL_S else 'MISSED'}")
    print(f"harness / unsharded {ratio:.1f}x (target <= {RATIO:.0f}x): {'met' if ratio <= RATIO else 'MISSED'}; "
          f"harness / floor {total.harness / total.floor:.2f}x; floor / unsharded {total.floor / total.unsharded:.1f}x")
    alone_ratio = total.alone / total.unsharded
    if alone_ratio > RATIO:
        print(f"what bounds it: gloo's collectives alone, the {total.collectives} the forwards make replayed back to "
              f"back on the same worlds, take {total.alone:.2f} s = {alone_ratio:.1f}x the unsharded forwards "
              f"(> {RATIO:.0f}x before any compute or transport): "
              + ", ".join(f"tp {tp} {1e3 * t.alone / t.collectives:.2f} ms a collective" for tp, t in by_tp.items()
                          if t.collectives))
    elif ratio > RATIO:
        print(f"what bounds it: not the collectives alone ({alone_ratio:.1f}x); the floor, with no transport per "
              f"call, is {total.floor / total.unsharded:.1f}x")
    return 0 if total_s <= TOTAL_S and ratio <= RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
