"""vLLM 0.33.0's KV pool for a model: layers grouped into KV cache groups that share one pool of block ids.

The C++ port (and the figures ROAD-V1-MEM gates, ``kv_bytes_per_block``) sizes a block as the sum of every
layer's page. vLLM 0.33.0 instead groups the layers and sizes one pool *block* by the largest group; each group
keeps its own block table and draws block ids from the shared pool, so a request at ``max_model_len`` takes the
sum over groups of what each group's spec needs (a sliding-window group needs only its window). This module
re-derives that model for ``kv-plan`` (issue 13, item 4), read from the vLLM 0.33.0 wheel; it does not import
vLLM. Where each fact comes from:

- Grouping, ``vllm/v1/core/kv_cache_planning.py``: ``get_kv_cache_groups`` (one group when every layer has the
  same spec, ``is_kv_cache_spec_uniform``, or the same type, ``UniformTypeKVCacheSpecs.from_specs``; else
  ``unify_kv_cache_spec_page_size`` then ``_get_kv_cache_groups_uniform_page_size``). The latter buckets layers
  by spec in layer order, takes the smallest bucket's layer count as the group size (the largest when
  ``max < 1.5 * min``), cuts each bucket into ``cdiv(len, group_size)`` groups and gives group ``i`` the layers
  ``layers[i::num_groups]``. A sliding-window spec is never of one type with full attention
  (``SlidingWindowSpec.is_uniform_with_collection``, ``vllm/v1/kv_cache_interface.py``), and the hybrid manager
  is on by default on CUDA (``VllmConfig`` post-init, ``vllm/config/vllm.py``), so Gemma-2 has two groups.
- Bytes per pool block, ``_get_kv_cache_bytes_per_block`` (kv_cache_planning.py): the largest group's sum of
  per-layer pages (rounded up to the layers' block-stride alignments, a no-op while those divide a page, as
  they do for equal pages); ``num_blocks = available_memory // bytes_per_block``
  (``get_kv_cache_config_from_groups``), replaced by ``num_gpu_blocks_override`` (``may_override_num_blocks``);
  a ``kv_cache_memory_bytes`` budget is the available memory as given (``Worker.determine_available_memory``,
  ``vllm/v1/worker/gpu_worker.py``).
- Blocks per request and capacity, ``vllm/v1/core/kv_cache_utils.py``:
  ``get_max_concurrency_for_kv_cache_config`` = ``num_blocks / sum over groups of
  cdiv(spec.max_memory_usage_bytes, spec.page_size_bytes)``; ``get_kv_cache_capacity`` = ``(int(concurrency *
  max_model_len), concurrency)``, which ``update_kv_cache_capacity`` logs as "GPU KV cache size" and "Maximum
  concurrency" (called from ``vllm/v1/engine/core.py`` with the pool's full block count).
- Per-group need, ``vllm/v1/kv_cache_interface.py``: full attention (MLA too) ``cdiv(max_model_len,
  block_size)`` pages (``FullAttentionSpec.max_memory_usage_bytes``, DCP 1); sliding window
  ``cdiv(min(window - 1 + max_in_flight_tokens, max_model_len), block_size) + 1`` pages
  (``SlidingWindowSpec.max_admission_blocks_per_request``, ``extra_retained_tokens`` 0 without speculative
  decoding). ``max_in_flight_tokens = max_concurrent_batches * max_num_batched_tokens``, and
  ``max_concurrent_batches`` is 2 with async scheduling at pipeline-parallel size 1 (``VllmConfig``
  properties, ``vllm/config/vllm.py``; async scheduling is on by default unless something disables it).

Page sizes are the port's (``impl/v1/kv_cache_interface.py``); where they differ from vLLM's is issue 13's
items 2 and 3, not this model. Not modelled (``unmodelled_reason`` says why): Mamba/GDN layers (vLLM first
raises the attention block size until one attention page holds a Mamba state and pads the Mamba page to it,
``Platform._align_hybrid_block_size`` in ``vllm/platforms/interface.py``, which depends on the attention
backend's kernel block sizes and the Mamba cache mode), layers whose pages differ, per-layer heterogeneous
specs, and spec kinds other than full, MLA and sliding-window attention.
"""
from __future__ import annotations

from dataclasses import dataclass

from impl.v1.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheSpec,
    MambaSpec,
    SlidingWindowSpec,
    cdiv,
)

VLLM_VERSION = "0.33.0"
MAX_CONCURRENT_BATCHES = 2
"""``VllmConfig.max_concurrent_batches`` with async scheduling (vLLM's default) at pipeline-parallel size 1."""
GROUP_SIZE_SLACK = 1.5
"""``_get_kv_cache_groups_uniform_page_size``: the largest bucket is the group size when it is below 1.5x the least."""


@dataclass(frozen=True)
class PoolGroup:
    """One of vLLM's KV cache groups: its layers, their (equal) spec, and the blocks a request takes in it."""

    spec: KVCacheSpec
    layer_names: tuple[str, ...]
    blocks_per_request: int

    @property
    def bytes_per_block(self) -> int:
        """The group's share of one pool block: its layers' pages side by side."""
        return self.spec.page_size_bytes * len(self.layer_names)


@dataclass(frozen=True)
class VllmPool:
    """vLLM's pool for a budget: groups, bytes per pool block, block count, token capacity, max concurrency."""

    groups: tuple[PoolGroup, ...]
    bytes_per_block: int
    num_blocks: int
    max_model_len: int
    max_in_flight_tokens: int

    @property
    def blocks_per_request(self) -> int:
        """Pool blocks one request at ``max_model_len`` takes: the sum over groups."""
        return sum(group.blocks_per_request for group in self.groups)

    @property
    def max_concurrency(self) -> float:
        """``get_max_concurrency_for_kv_cache_config``: num_blocks / blocks per request (a float, as vLLM)."""
        return self.num_blocks / self.blocks_per_request

    @property
    def kv_cache_tokens(self) -> int:
        """``get_kv_cache_capacity``: int(max_concurrency * max_model_len)."""
        return int(self.max_concurrency * self.max_model_len)


def unmodelled_reason(config: KVCacheConfig) -> str | None:
    """Why this module cannot give vLLM's pool for ``config``, or None when it can."""
    if config.per_layer_attn_specs:
        return "per-layer heterogeneous specs are not modelled"
    specs = [group.kv_cache_spec for group in config.kv_cache_groups]
    if not specs:
        return "the model has no KV cache layers"
    if any(isinstance(spec, MambaSpec) for spec in specs):
        return ("vLLM 0.33.0 first raises the attention block size until one attention page holds a Mamba state and "
                "pads the Mamba page to it (Platform._align_hybrid_block_size, vllm/platforms/interface.py), which "
                "depends on the attention backend's kernel block sizes; not modelled")
    other = sorted({type(spec).__name__ for spec in specs if not isinstance(spec, (FullAttentionSpec,
                                                                                   SlidingWindowSpec))})
    if other:
        return f"{', '.join(other)} layers are not modelled"
    if len({spec.page_size_bytes for spec in specs}) > 1:
        return ("the layers' pages differ (vLLM 0.33.0 unifies them with unify_kv_cache_spec_page_size or packs "
                "them block-outermost); not modelled")
    return None


def blocks_per_request(spec: KVCacheSpec, max_model_len: int, max_in_flight_tokens: int) -> int:
    """cdiv(spec.max_memory_usage_bytes, spec.page_size_bytes) of vLLM 0.33.0, for full and sliding attention."""
    if isinstance(spec, SlidingWindowSpec):
        tokens = min(spec.sliding_window - 1 + max_in_flight_tokens, max_model_len)
        return cdiv(tokens, spec.block_size) + 1
    if isinstance(spec, FullAttentionSpec):
        return cdiv(max_model_len, spec.block_size)
    raise TypeError(f"{type(spec).__name__} is not modelled")


def kv_cache_groups(config: KVCacheConfig) -> list[tuple[KVCacheSpec, tuple[str, ...]]]:
    """vLLM's kv_cache_groups for the probe's layers (``config``'s groups are the layers bucketed by spec).

    One bucket is one group (``_get_kv_cache_groups_uniform_spec``); several are split to one group size
    (``_get_kv_cache_groups_uniform_page_size``). The probe's groups hold distinct specs of distinct kinds, which
    vLLM's merge step cannot join (full and sliding-window specs do not merge).
    """
    reason = unmodelled_reason(config)
    if reason is not None:
        raise TypeError(reason)
    buckets = [(group.kv_cache_spec, tuple(group.layer_names)) for group in config.kv_cache_groups]
    if len(buckets) == 1:
        return buckets
    sizes = [len(names) for _, names in buckets]
    group_size = max(sizes) if max(sizes) < min(sizes) * GROUP_SIZE_SLACK else min(sizes)
    groups = []
    for spec, names in buckets:
        num_groups = cdiv(len(names), group_size)
        groups.extend((spec, names[i::num_groups]) for i in range(num_groups))
    return groups


def vllm_pool(config: KVCacheConfig, max_model_len: int, max_num_batched_tokens: int, *,
              available_memory: int | None = None, num_blocks_override: int | None = None) -> VllmPool:
    """vLLM 0.33.0's pool: ``num_blocks_override`` blocks, else ``available_memory // bytes_per_block``."""
    in_flight = MAX_CONCURRENT_BATCHES * max_num_batched_tokens
    groups = tuple(PoolGroup(spec, names, blocks_per_request(spec, max_model_len, in_flight))
                   for spec, names in kv_cache_groups(config))
    bytes_per_block = max(group.bytes_per_block for group in groups)
    if num_blocks_override is not None:
        num_blocks = num_blocks_override
    elif available_memory is not None:
        num_blocks = available_memory // bytes_per_block
    else:
        raise ValueError("vllm_pool needs available_memory or num_blocks_override")
    return VllmPool(groups, bytes_per_block, num_blocks, max_model_len, in_flight)
