"""The KV-cache fit check and the maximum-model-length estimate, with vLLM 0.33.0's messages (MEM-3.4, MEM-3.6, MEM-3.7).

Mirrors `_check_enough_kv_cache_memory`, `check_enough_kv_cache_memory`, `max_memory_usage_bytes` and
`estimate_max_model_len` of vllm/v1/core/kv_cache_planning.py (0.33.0; the per-layer sum of the need). The check
first holds back one pool block, the null block BlockPool keeps (`_pool_bytes_per_block`); the estimate does not.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from impl.v1.core.kv_cache_messages import CONSERVING_MEMORY_DOCS, NO_AVAILABLE_MEMORY_MESSAGE
from impl.v1.core.kv_pool_groups import kv_cache_groups
from impl.v1.field_checks import check_int, check_optional_int
from impl.v1.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec
from impl.worker.memory_snapshot import format_gib


class LayerKVSpec(Protocol):
    """What the fit check needs of a layer's KV spec (impl.v1.kv_cache_interface specs provide it)."""

    def max_memory_usage_bytes(self, max_model_len: int, max_num_batched_tokens: int | None = None) -> int:
        """Bytes the layer needs to hold one request of `max_model_len` tokens."""

    @property
    def page_size_bytes(self) -> int:
        """Bytes of one block of the layer (the null block's share)."""


def _check_inputs(kv_cache_spec: object, available_memory: object, max_model_len: object,
                  max_num_batched_tokens: object) -> None:
    if not isinstance(kv_cache_spec, Mapping):
        raise TypeError(f"kv_cache_spec must map layer names to KV specs, got {type(kv_cache_spec).__name__}")
    for layer_name, spec in kv_cache_spec.items():
        if not callable(getattr(spec, "max_memory_usage_bytes", None)):
            raise TypeError(f"kv_cache_spec[{layer_name!r}] has no max_memory_usage_bytes(); got {type(spec).__name__}")
    if isinstance(available_memory, bool) or not isinstance(available_memory, int):
        raise TypeError(f"available_memory must be an int number of bytes, got {available_memory!r}")
    check_int("kv_cache_utils", "max_model_len", max_model_len, minimum=1)
    check_optional_int("kv_cache_utils", "max_num_batched_tokens", max_num_batched_tokens, minimum=1)


def max_memory_usage_bytes(kv_cache_spec: Mapping[str, LayerKVSpec], max_model_len: int,
                           max_num_batched_tokens: int | None = None) -> int:
    """Bytes all layers need together to hold one request of `max_model_len` tokens."""
    return sum(spec.max_memory_usage_bytes(max_model_len, max_num_batched_tokens) for spec in kv_cache_spec.values())


def estimate_max_model_len(kv_cache_spec: Mapping[str, LayerKVSpec], available_memory: int, max_model_len: int,
                           max_num_batched_tokens: int | None = None) -> int:
    """The longest length in [1, max_model_len] whose KV need fits `available_memory`; 0 when not even 1 fits.

    A binary search, as vLLM's: the need grows with the length, so the lengths that fit form a prefix.
    """
    _check_inputs(kv_cache_spec, available_memory, max_model_len, max_num_batched_tokens)

    def fits(length: int) -> bool:
        return max_memory_usage_bytes(kv_cache_spec, length, max_num_batched_tokens) <= available_memory

    if not fits(1):
        return 0
    low, high = 1, max_model_len  # invariant: fits(low); every length above high fails or is out of range
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def null_block_bytes(kv_cache_spec: Mapping[str, LayerKVSpec]) -> int:
    """Bytes of the pool block vLLM 0.33.0 keeps as the null block (MEM-3.6): one block of the largest KV cache
    group, its layers' pages side by side (`_pool_bytes_per_block`, vllm/v1/core/kv_cache_planning.py).

    Layers of one spec are one group; mixed specs are grouped as impl.v1.core.kv_pool_groups models vLLM's
    grouping (TypeError where that model does not reach).
    """
    specs = list(kv_cache_spec.values())
    if all(spec == specs[0] for spec in specs):
        return sum(spec.page_size_bytes for spec in specs)
    buckets: dict[object, list[str]] = {}
    for name, spec in kv_cache_spec.items():
        buckets.setdefault(spec, []).append(name)
    config = KVCacheConfig(num_blocks=0, kv_cache_tensors=(),
                           kv_cache_groups=tuple(KVCacheGroupSpec(tuple(names), spec) for spec, names in buckets.items()))
    return max(spec.page_size_bytes * len(names) for spec, names in kv_cache_groups(config))


def check_enough_kv_cache_memory(kv_cache_spec: Mapping[str, LayerKVSpec], available_memory: int, max_model_len: int,
                                 max_num_batched_tokens: int | None = None) -> None:
    """Refuse, with vLLM 0.33.0's messages, a KV budget that cannot hold the null block and one request of
    `max_model_len` tokens; the message reports the budget less the null block, and the estimate is made on it."""
    _check_inputs(kv_cache_spec, available_memory, max_model_len, max_num_batched_tokens)
    if not kv_cache_spec:
        return  # an attention-free model keeps no KV cache
    usable_memory = available_memory - null_block_bytes(kv_cache_spec)
    if usable_memory <= 0:
        raise ValueError(NO_AVAILABLE_MEMORY_MESSAGE)
    needed_memory = max_memory_usage_bytes(kv_cache_spec, max_model_len, max_num_batched_tokens)
    if needed_memory <= usable_memory:
        return
    estimated = estimate_max_model_len(kv_cache_spec, usable_memory, max_model_len, max_num_batched_tokens)
    estimate_sentence = (f"Based on the available memory, the estimated maximum model length is {estimated}. "
                         if estimated > 0 else "")
    raise ValueError(
        f"To serve at least one request with the model's max seq len ({max_model_len}), "
        f"({format_gib(needed_memory)} GiB KV cache is needed, which is larger than the available KV cache memory "
        f"({format_gib(usable_memory)} GiB). {estimate_sentence}Try increasing `gpu_memory_utilization` (which also "
        f"controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the engine. "
        f"See {CONSERVING_MEMORY_DOCS} for more details."
    )
