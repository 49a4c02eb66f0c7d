"""Known-bad whole models for the tp-model-greedy and model-greedy-on-device gates (issue 30 items 3 and 6): the
impl with one defect a port of the Qwen3 forward or of its TP sharding tends to have.

Each defect is patched into impl.model_executor.models.qwen3 (or the layer module it composes) for one call only,
inside the rank processes (the rank functions below are module-level, so run_on_ranks pickles them by reference) and
undone after it: a gloo world is reused from call to call, and the correct impl may run on it next.
"""
from __future__ import annotations

import contextlib
import dataclasses
from types import ModuleType
from typing import Any, Callable, Iterator

import torch

from impl.model_executor.layers import linear
from impl.model_executor.models import qwen3

Patch = Callable[[int, Any], contextlib.AbstractContextManager[None]]


@contextlib.contextmanager
def _replaced(name: str, value: Any, module: ModuleType = qwen3) -> Iterator[None]:
    """module.<name> (qwen3's by default) is ``value`` for the duration."""
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, original)


@contextlib.contextmanager
def _qk_norm_skipped(rank: int, run: Any) -> Iterator[None]:
    """q_norm and k_norm left out: the per-head RMSNorm (the only one on a 3-d [tokens, heads, head_dim] tensor)
    returns its input."""
    real = qwen3.rms_norm

    def norm(x: torch.Tensor, weight: Any, eps: float, residual: Any = None) -> Any:
        return x if x.dim() == 3 else real(x, weight, eps, residual)

    with _replaced("rms_norm", norm):
        yield


@contextlib.contextmanager
def _final_norm_skipped(rank: int, run: Any) -> Iterator[None]:
    """The final RMSNorm (model.norm) left out: lm_head reads the raw residual stream."""
    real, final = qwen3.rms_norm, run.weights["model.norm.weight"]

    def norm(x: torch.Tensor, weight: Any, eps: float, residual: Any = None) -> Any:
        return x if weight is final else real(x, weight, eps, residual)

    with _replaced("rms_norm", norm):
        yield


@contextlib.contextmanager
def _decode_positions_restarted(rank: int, run: Any) -> Iterator[None]:
    """The decoded tokens rotated at positions 0, 1, ... again after the prompt's, as a decode step that counts its
    positions from the step instead of from the sequence's start."""
    real, prompt_length = qwen3.rotary_embedding, run.prompt.shape[0]

    def rope(positions: torch.Tensor, query: Any, key: Any, *args: Any) -> Any:
        restarted = torch.where(positions >= prompt_length, positions - prompt_length, positions)
        return real(restarted, query, key, *args)

    with _replaced("rotary_embedding", rope):
        yield


@contextlib.contextmanager
def _kv_shard_by_rank(rank: int, run: Any) -> Iterator[None]:
    """Each rank loads K/V shard ``rank`` (wrapped into the Hkv / kv_heads_per_rank shards there are) instead of
    ``rank // replicas``: with replicated KV heads, rank 1 of tp 4 reads KV head 1 where vLLM gives it head 0 (TP-4.3).
    Planted in the QKV layer's shard function, so the decoder's QKVParallelLinear cuts the wrong rows."""
    real = linear.qkv_shard

    def qkv_shard(name: str, sources: Any, hidden: int, num_heads: int, num_kv_heads: int, head_dim: int, tp: int,
                  of_rank: int) -> Any:
        shard = real(name, sources, hidden, num_heads, num_kv_heads, head_dim, tp, of_rank)
        q, k, v = shard.parts
        size = k.rows[1] - k.rows[0]
        held = of_rank % (num_kv_heads * head_dim // size)
        rows = (held * size, (held + 1) * size)
        return dataclasses.replace(shard, parts=(q, dataclasses.replace(k, rows=rows), dataclasses.replace(v, rows=rows)))

    with _replaced("qkv_shard", qkv_shard, linear):
        yield


def _rank_with(patch: Patch, rank: int, tp: int, run: Any) -> Any:
    with patch(rank, run):
        return qwen3.rank_greedy(rank, tp, run)


def _rank_qk_norm_skipped(rank: int, tp: int, run: Any) -> Any:
    return _rank_with(_qk_norm_skipped, rank, tp, run)


def _rank_final_norm_skipped(rank: int, tp: int, run: Any) -> Any:
    return _rank_with(_final_norm_skipped, rank, tp, run)


def _rank_decode_positions_restarted(rank: int, tp: int, run: Any) -> Any:
    return _rank_with(_decode_positions_restarted, rank, tp, run)


def _rank_kv_shard_by_rank(rank: int, tp: int, run: Any) -> Any:
    return _rank_with(_kv_shard_by_rank, rank, tp, run)


def qk_norm_skipped(config: Any, weights: Any, prompt: Any, steps: int, tp: int) -> dict[str, torch.Tensor]:
    return qwen3.run_greedy(config, weights, prompt, steps, tp, _rank_qk_norm_skipped)


def final_norm_skipped(config: Any, weights: Any, prompt: Any, steps: int, tp: int) -> dict[str, torch.Tensor]:
    return qwen3.run_greedy(config, weights, prompt, steps, tp, _rank_final_norm_skipped)


def decode_positions_restarted(config: Any, weights: Any, prompt: Any, steps: int, tp: int) -> dict[str, torch.Tensor]:
    return qwen3.run_greedy(config, weights, prompt, steps, tp, _rank_decode_positions_restarted)


def kv_shard_by_rank(config: Any, weights: Any, prompt: Any, steps: int, tp: int) -> dict[str, torch.Tensor]:
    return qwen3.run_greedy(config, weights, prompt, steps, tp, _rank_kv_shard_by_rank)


def on_device_qk_norm_skipped(config: Any, weights: Any, prompt: Any, steps: int, dtype: str) -> dict[str, torch.Tensor]:
    """model-greedy-on-device with q_norm and k_norm left out (one process: patched around the call)."""
    with _qk_norm_skipped(0, None):
        return qwen3.greedy_on_device(config, weights, prompt, steps, dtype)
