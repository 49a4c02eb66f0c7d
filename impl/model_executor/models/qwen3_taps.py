"""The decoder-taps operation (spec/model-taps.md; gates/rows/model_taps/operations.yaml): one forward of the Qwen3
decoder of qwen3.py over ``ids``, its named intermediates in forward order, the feed points optionally fed.

The weights are cast to the compute dtype and the forward runs in it, as vLLM's forward_native does on weights of that
dtype; the taps are what rank 0 holds after the collectives (K and V gathered over the ranks), the logits widened to
float32, and with ``rank_partials`` every rank's partial before each all-reduce, gathered. The layer code is the greedy
decode's own (qwen3._layer): the taps are recorded by a Recorder.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from impl.model_executor.models import qwen3
from impl.model_executor.models.qwen3_weights import ModelConfig, checked_ids, checked_tp, checked_weights
from impl.model_executor.models.taps import Recorder
from impl.model_executor.models.taps_inputs import checked_dtype, checked_feed, checked_rank_partials


@dataclass(frozen=True)
class TapsRun:
    """What every rank gets: the checked inputs of one decoder-taps call."""

    config: ModelConfig
    weights: dict[str, torch.Tensor]
    ids: torch.Tensor
    dtype: torch.dtype
    feed: dict[str, torch.Tensor]
    rank_partials: bool = False


def tapped_forward(model: qwen3.RankModel, ids: torch.Tensor, feed: Mapping[str, torch.Tensor],
                   rank_partials: bool = False) -> dict[str, torch.Tensor]:
    """The taps of one forward of ``model`` over ``ids`` with ``feed`` read at its feed points, the ranks' partials
    too with ``rank_partials`` (MT-1.1, MT-1.6, MT-2.1)."""
    recorder = Recorder(feed, {}, rank_partials)
    logits = qwen3.head(model, qwen3.decoder(model, ids, recorder), recorder)
    recorder.tap("logits", logits.float())
    assert recorder.taps is not None
    return recorder.taps


def _rank_model(rank: int, tp: int, run: TapsRun) -> qwen3.RankModel:
    """On a rank, one thread: the weights cast to the compute dtype, this rank's shards cut."""
    torch.set_num_threads(1)
    weights = {name: tensor.to(run.dtype) for name, tensor in run.weights.items()}
    return qwen3.rank_model(run.config, weights, tp, rank)


def rank_taps(rank: int, tp: int, run: TapsRun) -> dict[str, torch.Tensor]:
    """The rank function run_on_ranks calls: cast the weights, cut this rank's shards, run the tapped forward."""
    return tapped_forward(_rank_model(rank, tp, run), run.ids, run.feed, run.rank_partials)


def rank_logits(rank: int, tp: int, run: TapsRun) -> dict[str, torch.Tensor]:
    """rank_taps' forward with nothing recorded and nothing fed (NO_TAPS): the logits alone, float32."""
    model = _rank_model(rank, tp, run)
    return {"logits": qwen3.head(model, qwen3.decoder(model, run.ids)).float()}


def _agreed(results: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Rank 0's taps, once every rank returned the same names and bits; else a RuntimeError naming the first rank and
    tap that differ."""
    taps = results[0]
    for rank, theirs in enumerate(results[1:], start=1):
        if list(theirs) != list(taps):
            raise RuntimeError(f"decoder-taps: rank {rank} reports taps {list(theirs)}, rank 0 {list(taps)}")
        for name, value in taps.items():
            if not torch.equal(theirs[name], value):
                raise RuntimeError(f"decoder-taps: rank {rank}'s tap {name!r} differs from rank 0's")
    return taps


def run_taps(config: Any, weights: Any, ids: Any, tp: Any, dtype: Any, feed: Any, rank_partials: Any,
             rank_fn: qwen3.RankFunction) -> dict[str, torch.Tensor]:
    """The checked inputs run by ``rank_fn(rank, tp, TapsRun)`` on every rank of the gloo world of ``tp``; rank 0's
    taps once all agree."""
    from impl.distributed.gloo_world import run_on_ranks

    checked = ModelConfig.from_mapping(config)
    full = checked_weights(checked, weights)
    tokens = checked_ids(checked, ids)
    count = checked_tp(checked, tp)
    run = TapsRun(checked, full, tokens, checked_dtype(dtype), checked_feed(checked, feed, tokens.shape[0]),
                  checked_rank_partials(rank_partials))
    return _agreed(run_on_ranks(count, rank_fn, run, timeout_s=qwen3.CALL_TIMEOUT_S))


def decoder_taps(config: Mapping[str, Any], weights: Mapping[str, Any], ids: Any, tp: int = 1,
                 dtype: str = "float32", feed: Mapping[str, Any] | None = None,
                 rank_partials: bool = False) -> dict[str, torch.Tensor]:
    """The decoder-taps operation: tap name -> [T, ...] tensor in forward order (embed, per layer attn.in, attn.k,
    attn.v, attn.out, mlp.in, mlp.out, out, then norm.in, norm.out, logits float32 [T, vocab]; with ``rank_partials``
    each rank's partial before attn.out and mlp.out) (MT-1.x to MT-3.x)."""
    return run_taps(config, weights, ids, tp, dtype, feed, rank_partials, rank_taps)


def decoder_logits(config: Mapping[str, Any], weights: Mapping[str, Any], ids: Any, tp: int = 1,
                   dtype: str = "float32") -> dict[str, torch.Tensor]:
    """decoder_taps' forward untapped: {logits float32 [T, vocab]} over the same checked inputs, ranks and layer code,
    nothing recorded (the baseline a tapped forward is timed against: ci/bench/bench_taps.py)."""
    return run_taps(config, weights, ids, tp, dtype, None, False, rank_logits)
