"""Engine load parameters and KV-pool block-count precedence (MEM-1.1 to MEM-1.8, MEM-3.1 entry).

Mirrors the C++ port's ``EngineParams`` / ``LoadedEngine::ResolveNumBlocks`` (src/vllm/model_loader.{h,cpp})
and vLLM's knobs in vllm/config/cache.py and vllm/v1/core/kv_cache_utils.py.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from impl.v1.core.kv_cache_messages import NO_AVAILABLE_MEMORY_MESSAGE
from impl.v1.field_checks import check_choice, check_fraction, check_int, check_optional_str

if TYPE_CHECKING:  # torch-free at import, so CLI --help stays fast; the KV module is loaded on first use
    from impl.capi.errors import InvalidArgument
    from impl.v1.kv_cache_interface import KVCacheConfig

FALLBACK_NUM_BLOCKS = 256
"""Blocks used on the utilization path until the profile run (ROAD-V1-MEM M3) lands."""

Knob = Literal["num_blocks", "kv_cache_memory_bytes", "gpu_memory_utilization", "fallback"]


class DefaultUtilization(float):
    """The float 0.92 marked as "not chosen by the caller".

    ``EngineParams.gpu_memory_utilization`` holds this exact object when no utilization was given, so
    an explicit ``0.92`` (a plain float) can be told from the default while both compare equal to 0.92.
    """

    def __repr__(self) -> str:
        return f"DefaultUtilization({float(self)!r})"


DEFAULT_GPU_MEMORY_UTILIZATION = DefaultUtilization(0.92)
"""vLLM's default since 2026 (vllm/config/cache.py); pass nothing, or this object, to mean "default"."""


NO_CACHE_MEMORY = NO_AVAILABLE_MEMORY_MESSAGE
"""vLLM 0.33.0's refusal when the profile leaves nothing for the KV cache (vllm/v1/core/kv_cache_planning.py)."""


class UtilizationNotAppliedWarning(UserWarning):
    """An explicit gpu_memory_utilization was accepted but did not size the KV pool (no profile run)."""


_TRI_STATES = (0, 1, 2)
_DEVICES = (0, 1, 2)

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
C_INT_MEMBERS = MappingProxyType({
    "block_size": ("int32_t", 1, INT32_MAX), "num_blocks": ("int32_t", 0, INT32_MAX),
    "max_model_len": ("int32_t", 0, INT32_MAX), "max_num_batched_tokens": ("int32_t", 0, INT32_MAX),
    "kv_cache_memory_bytes": ("int64_t", 0, INT64_MAX), "max_num_seqs": ("int32_t", 1, INT32_MAX),
})
"""Integer fields that cross the C ABI: (C type of the vllm_model_params member, least value, greatest value),
in the order ``EngineParams`` checks them."""


def no_c_spelling(name: str, value: int) -> InvalidArgument:
    """The refusal of an integer field outside its C member's range (issue 14: no silent wrap at the ABI)."""
    from impl.capi.errors import InvalidArgument  # lazily: impl.capi imports this module

    ctype, minimum, maximum = C_INT_MEMBERS[name]
    return InvalidArgument(f"EngineParams.{name}={value!r} has no {ctype} spelling in vllm_model_params "
                           f"(accepted: {minimum}..{maximum})", field=name)


def _check_tri_state(owner: str, name: str, value: Any, choices: tuple[int, ...]) -> None:
    """An int member with a few meanings: an int (``2.0`` is refused, not compared equal to 2) among ``choices``."""
    if not isinstance(value, int):
        raise TypeError(f"{owner}.{name} must be one of {list(choices)} (an int), got {value!r} "
                        f"({type(value).__name__})")
    check_choice(owner, name, value, choices)


@dataclass(frozen=True)
class EngineParams:
    """Load-time parameters, one field per field of the C struct ``vllm_model_params`` at ABI v16.

    Sizing knobs: ``num_blocks`` (> 0 overrides, 0 = auto), ``kv_cache_memory_bytes`` (0 = unset),
    ``gpu_memory_utilization`` (fraction of total device memory, in (0, 1]). Whether the utilization
    was chosen is ``gpu_memory_utilization_is_explicit``: False only for the ``DefaultUtilization``
    object that the field defaults to.
    """

    model_path: str | None = None
    tokenizer_config_path: str | None = None
    block_size: int = 32
    num_blocks: int = 0
    max_model_len: int = 0
    max_num_seqs: int = 32
    tool_parser: str | None = None
    reasoning_parser: str | None = None
    speculative_config: str | None = None
    enable_prefix_caching: int = 0
    max_num_batched_tokens: int = 0
    scheduling_policy: str | None = None
    kv_transfer_config: str | None = None
    enable_jump_forward: int = 0
    device: int = 0
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    kv_cache_memory_bytes: int = 0

    def __post_init__(self) -> None:
        owner = "EngineParams"
        for name in ("model_path", "tokenizer_config_path", "tool_parser", "reasoning_parser",
                     "speculative_config", "scheduling_policy", "kv_transfer_config"):
            check_optional_str(owner, name, getattr(self, name))
        for name, (_, minimum, maximum) in C_INT_MEMBERS.items():
            value = check_int(owner, name, getattr(self, name), minimum=minimum)
            if value > maximum:
                raise no_c_spelling(name, value)
        _check_tri_state(owner, "enable_prefix_caching", self.enable_prefix_caching, _TRI_STATES)
        _check_tri_state(owner, "enable_jump_forward", self.enable_jump_forward, _TRI_STATES)
        _check_tri_state(owner, "device", self.device, _DEVICES)
        utilization = check_fraction(owner, "gpu_memory_utilization", self.gpu_memory_utilization)
        if not isinstance(self.gpu_memory_utilization, DefaultUtilization):
            object.__setattr__(self, "gpu_memory_utilization", utilization)

    @property
    def gpu_memory_utilization_is_explicit(self) -> bool:
        """True when the caller chose the utilization, even if the value equals the default 0.92."""
        return not isinstance(self.gpu_memory_utilization, DefaultUtilization)


class NoKVBytesPerBlockError(ValueError):
    """A byte budget or profile cannot size a pool for a model whose blocks hold no KV bytes (MEM-1.7)."""


@dataclass(frozen=True)
class PoolSizing:
    """A resolved KV pool: the block count, the knob that decided it and the bytes per block used."""

    num_blocks: int
    decided_by: Knob
    bytes_per_block: int | None


def _bytes_per_block(probe: KVCacheConfig, knob: str) -> int:
    from impl.v1.kv_cache_interface import kv_bytes_per_block

    bpb = kv_bytes_per_block(probe)
    if bpb <= 0:
        raise NoKVBytesPerBlockError(f"the model reports {bpb} KV bytes per block; cannot size the pool from {knob}")
    return bpb


def _available_kv_memory(profile: Any) -> int:
    avail = getattr(profile, "available_kv_cache_memory", None)
    if isinstance(avail, bool) or not isinstance(avail, int):
        raise TypeError(f"profile.available_kv_cache_memory must be an int of bytes, got {avail!r}")
    return avail


def _int32_block_count(blocks: int, source: str, bpb: int) -> int:
    """A resolved block count the int32_t ``num_blocks`` can hold; a larger one is refused, never wrapped (issue 12).
    ``source`` names the bytes ("--kv-cache-memory N bytes makes")."""
    if blocks > INT32_MAX:
        raise ValueError(f"{source} {blocks} KV blocks of {bpb} bytes, more than the {INT32_MAX} an engine counts "
                         "(vllm_model_params.num_blocks is an int32_t); give a smaller budget or --num-blocks")
    return blocks


def resolve_kv_pool(params: EngineParams, probe: KVCacheConfig, profile: Any = None) -> PoolSizing:
    """Size the KV pool: num_blocks > kv_cache_memory_bytes > profile > the 256-block fallback.

    The override is returned as given, without a fit check (as vLLM's num_gpu_blocks_override).
    A byte budget is floor-divided by the bytes per block and ignores the utilization (as vLLM); a count above
    INT32_MAX (the C struct's and the engine's int32_t) is a ValueError naming the count and the limit.
    ``profile`` is any object with an int ``available_kv_cache_memory`` (bytes left for the pool).
    """
    if not isinstance(params, EngineParams):
        raise TypeError(f"resolve_kv_pool needs EngineParams, got {params!r}")
    if params.num_blocks > 0:
        return PoolSizing(params.num_blocks, "num_blocks", None)
    if params.kv_cache_memory_bytes > 0:
        budget = params.kv_cache_memory_bytes
        bpb = _bytes_per_block(probe, "--kv-cache-memory")
        if budget < bpb:
            raise ValueError(
                f"--kv-cache-memory {budget} bytes is smaller than a single KV block ({bpb} bytes); "
                "raise --kv-cache-memory or set an explicit --num-blocks"
            )
        blocks = _int32_block_count(budget // bpb, f"--kv-cache-memory {budget} bytes makes", bpb)
        return PoolSizing(blocks, "kv_cache_memory_bytes", bpb)
    if profile is not None:
        avail = _available_kv_memory(profile)
        if avail <= 0:
            raise ValueError(
                f"{NO_CACHE_MEMORY} (The profile left {avail} bytes for the KV cache at "
                f"gpu_memory_utilization={float(params.gpu_memory_utilization)}; --kv-cache-memory or "
                "--num-blocks size the pool without it.)"
            )
        bpb = _bytes_per_block(probe, "the memory profile")
        if avail < bpb:
            raise ValueError(
                f"the {avail} bytes of available KV cache memory are smaller than a single KV block "
                f"({bpb} bytes); increase `gpu_memory_utilization`, or set --kv-cache-memory or --num-blocks"
            )
        blocks = _int32_block_count(avail // bpb, f"the {avail} bytes of available KV cache memory make", bpb)
        return PoolSizing(blocks, "gpu_memory_utilization", bpb)
    if params.gpu_memory_utilization_is_explicit:
        warnings.warn(
            f"--gpu-memory-utilization {float(params.gpu_memory_utilization)} was accepted but did not size "
            f"the KV cache: the memory profile run (ROAD-V1-MEM M3) is not available, so the pool falls back "
            f"to {FALLBACK_NUM_BLOCKS} blocks. Size it with --kv-cache-memory <bytes> or --num-blocks <n>.",
            UtilizationNotAppliedWarning,
            stacklevel=3,
        )
    return PoolSizing(FALLBACK_NUM_BLOCKS, "fallback", None)


def resolve_num_blocks(params: EngineParams, probe: KVCacheConfig, profile: Any = None) -> int:
    """The block count of :func:`resolve_kv_pool`."""
    return resolve_kv_pool(params, probe, profile).num_blocks
