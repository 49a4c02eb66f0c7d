"""TP-W2 speed (issue 30 "Speed"): >= 1,000 generated layer configurations (column, row, qkv, MLP, vocab embedding,
lm_head; tp in {1, 2, 4, 8}) run sharded on the gloo worlds of impl/distributed/gloo_world.py (each world started
once, then reused) beside the same forwards run unsharded in this process, side by side in one run.

Targets: the whole run (worlds, sharded and unsharded forwards, the comparison) within 120 s on a 2-core machine, and
the sharded forwards within 4x the unsharded ones. Each configuration's per-rank results are checked against the
unsharded forward (float32, torch.testing.assert_close's defaults). Both sides compute on one thread, as each rank does. The configurations of one tp go to the ranks in
batches (one run_on_ranks call per batch); every configuration still runs its own collectives.
Exit status 1 when a target is missed. Run: python ci/bench/bench_tp_w2.py [--configs N] [--batch B]
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402  (after the path set-up)

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=1008, help="configurations in all (default 1008)")
    parser.add_argument("--batch", type=int, default=21, help="configurations per run_on_ranks call (default 21)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as every rank runs: one thread each
    started = time.perf_counter()
    gen = torch.Generator().manual_seed(30)
    kinds = tuple(RANK_FORWARD)
    per_tp = -(-args.configs // len(TPS))
    configs = {tp: [_config(kinds[i % len(kinds)], tp, gen) for i in range(per_tp)] for tp in TPS}
    world_s = time.perf_counter()
    for tp in TPS:
        run_on_ranks(tp, run_batch, [])
    world_s = time.perf_counter() - world_s
    sharded_s = unsharded_s = 0.0
    by_tp: dict[int, float] = {}
    for tp in TPS:
        for start in range(0, per_tp, args.batch):
            batch = configs[tp][start:start + args.batch]
            t0 = time.perf_counter()
            by_rank = run_on_ranks(tp, run_batch, batch, timeout_s=120)
            t1 = time.perf_counter()
            whole = run_batch(0, 1, batch)  # the same forwards, unsharded, in this process
            unsharded_s += time.perf_counter() - t1
            sharded_s += t1 - t0
            by_tp[tp] = by_tp.get(tp, 0.0) + t1 - t0
            for number, (kind, _) in enumerate(batch):
                _check(kind, [by_rank[rank][number] for rank in range(tp)], whole[number])
    total_s = time.perf_counter() - started
    ratio = sharded_s / unsharded_s
    count = per_tp * len(TPS)
    print(f"{count} configurations (tp {', '.join(map(str, TPS))}; {args.batch} a call), every rank's result checked "
          f"against the unsharded forward")
    print(f"worlds started once: {world_s:.2f} s; sharded: {sharded_s:.2f} s ("
          + ", ".join(f"tp {tp} {seconds:.2f} s" for tp, seconds in by_tp.items()) + f"); unsharded: {unsharded_s:.2f} s")
    print(f"total {total_s:.1f} s (target <= {TOTAL_S:.0f} s): {'met' if total_s <= TOTAL_S else 'MISSED'}")
    print(f"sharded / unsharded {ratio:.1f}x (target <= {RATIO:.0f}x): {'met' if ratio <= RATIO else 'MISSED'}")
    return 0 if total_s <= TOTAL_S and ratio <= RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
