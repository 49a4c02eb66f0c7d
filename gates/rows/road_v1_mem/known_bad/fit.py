"""Known-bad fit checks and length estimates the ROAD-V1-MEM M3 gates must reject (same signatures as impl)."""
from __future__ import annotations

from collections.abc import Mapping

from impl.v1.core import kv_cache_utils as good
from impl.v1.core.kv_cache_utils import LayerKVSpec
from impl.worker.memory_snapshot import format_gib

UNBOUNDED_LEN = 1 << 40


def estimate_counts_partial_blocks(kv_cache_spec: Mapping[str, LayerKVSpec], available_memory: int,
                                   max_model_len: int, max_num_batched_tokens: int | None = None) -> int:
    """Divides the budget by bytes per token, as if a request could hold part of a block."""
    per_token = sum(spec.page_size_bytes / spec.block_size for spec in kv_cache_spec.values())
    return min(max(int(available_memory // per_token), 0), max_model_len)


def estimate_ignores_max_model_len(kv_cache_spec: Mapping[str, LayerKVSpec], available_memory: int,
                                   max_model_len: int, max_num_batched_tokens: int | None = None) -> int:
    """Reports every token the budget holds, beyond the model's own max_model_len."""
    return good.estimate_max_model_len(kv_cache_spec, available_memory, UNBOUNDED_LEN, max_num_batched_tokens)


def estimate_never_zero(kv_cache_spec: Mapping[str, LayerKVSpec], available_memory: int, max_model_len: int,
                        max_num_batched_tokens: int | None = None) -> int:
    """Answers at least 1 even when not one token fits."""
    return max(1, good.estimate_max_model_len(kv_cache_spec, available_memory, max_model_len, max_num_batched_tokens))


def fit_check_one_layer(kv_cache_spec: Mapping[str, LayerKVSpec], available_memory: int, max_model_len: int,
                        max_num_batched_tokens: int | None = None) -> None:
    """Counts the need of the first layer only."""
    first = dict(list(kv_cache_spec.items())[:1])
    good.check_enough_kv_cache_memory(first, available_memory, max_model_len, max_num_batched_tokens)


def fit_check_skips_empty_budget(kv_cache_spec: Mapping[str, LayerKVSpec], available_memory: int,
                                 max_model_len: int, max_num_batched_tokens: int | None = None) -> None:
    """Gives the no-memory refusal only for a budget <= 0 before the null block is held back: a budget of at most
    one pool block gets the too-small message instead."""
    null = good.null_block_bytes(kv_cache_spec) if kv_cache_spec else 0
    if available_memory > 0 and available_memory - null <= 0:
        need = good.max_memory_usage_bytes(kv_cache_spec, max_model_len, max_num_batched_tokens)
        raise ValueError(f"To serve at least one request with the model's max seq len ({max_model_len}), "
                         f"({format_gib(need)} GiB KV cache is needed, which is larger than the available KV cache "
                         f"memory ({format_gib(available_memory - null)} GiB). Try increasing ...")
    good.check_enough_kv_cache_memory(kv_cache_spec, available_memory, max_model_len, max_num_batched_tokens)


def fit_check_refuses_exact_fit(kv_cache_spec: Mapping[str, LayerKVSpec], available_memory: int,
                                max_model_len: int, max_num_batched_tokens: int | None = None) -> None:
    """Refuses a budget that holds the request exactly."""
    good.check_enough_kv_cache_memory(kv_cache_spec, available_memory - 1, max_model_len, max_num_batched_tokens)


def fit_check_without_null_block(kv_cache_spec: Mapping[str, LayerKVSpec], available_memory: int,
                                 max_model_len: int, max_num_batched_tokens: int | None = None) -> None:
    """The check before vLLM 0.33.0 (and the port's until issue 13): the whole budget, no null block held back."""
    null = good.null_block_bytes(kv_cache_spec) if kv_cache_spec and available_memory > 0 else 0
    good.check_enough_kv_cache_memory(kv_cache_spec, available_memory + null, max_model_len, max_num_batched_tokens)


def fit_check_null_block_of_one_layer(kv_cache_spec: Mapping[str, LayerKVSpec], available_memory: int,
                                      max_model_len: int, max_num_batched_tokens: int | None = None) -> None:
    """Holds back one layer's page instead of one block of the whole pool (every layer's page)."""
    if kv_cache_spec and available_memory > 0:
        first = next(iter(kv_cache_spec.values()))
        available_memory += good.null_block_bytes(kv_cache_spec) - first.page_size_bytes
    good.check_enough_kv_cache_memory(kv_cache_spec, available_memory, max_model_len, max_num_batched_tokens)
