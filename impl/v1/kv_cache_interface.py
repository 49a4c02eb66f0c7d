"""KV-cache layer specs, groups and bytes per KV block (MEM-2.1 to MEM-2.9).

Mirrors vllm/v1/kv_cache_interface.py (specs, page sizes, max usage) and the C++ port's
``vllm::v1::KVBytesPerBlock`` (src/vllm/v1/kv_cache_interface.cpp) for the sum over groups.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from math import prod
from typing import TYPE_CHECKING

from impl.v1.dtypes import PlainDType, is_dtype
from impl.v1.field_checks import check_choice, check_int, check_optional_int, check_optional_str

if TYPE_CHECKING:  # torch-free at import: kv-plan builds specs from PlainDType (impl/v1/dtypes.py)
    import torch

FP8_DS_MLA = "fp8_ds_mla"
"""MLA cache dtype of DeepSeek's sparse FlashMLA: a fixed 656-byte entry per token."""
FP8_DS_MLA_BYTES_PER_TOKEN = 656
FP8_DS_MLA_HEAD_SIZE = 576
MAMBA_CACHE_MODES = ("none", "align")
"""vLLM 0.33.0's ``MambaCacheMode`` (vllm/config/cache.py): no "all" mode any more (MEM-2.9)."""

FLOAT32_BYTES = 4
"""Bytes of one fp32 scale (``torch.float32.itemsize``)."""


def check_dtype(owner: str, name: str, value: object) -> None:
    """Refuse ``value`` unless it is a ``torch.dtype`` (or its torch-free stand-in ``PlainDType``)."""
    if not is_dtype(value):
        raise TypeError(f"{owner}.{name} must be a torch.dtype, got {value!r} ({type(value).__name__})")


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative ints."""
    return -(-a // b)


class KVQuantMode(IntEnum):
    """How a KV cache is quantized; every member of vLLM 0.33.0's ``KVQuantMode``, with its value
    (vllm/v1/kv_cache_interface.py). The port lays out pages for NONE, FP8_PER_TENSOR, INT8_PER_TOKEN_HEAD,
    FP8_PER_TOKEN_HEAD and NVFP4 (``LAID_OUT_QUANT_MODES``); an attention spec refuses the others."""

    NONE = 0
    FP8_PER_TENSOR = 1
    INT8_PER_TOKEN_HEAD = 2
    FP8_PER_TOKEN_HEAD = 3
    INT4_PER_TOKEN_HEAD = 4
    NVFP4 = 5
    TURBOQUANT_K8V4 = 6
    TURBOQUANT_4BIT_NC = 7
    TURBOQUANT_K3V4_NC = 8
    TURBOQUANT_3BIT_NC = 9
    NVFP4_DS_MLA = 10
    ULTRAQUANT_4BIT = 11
    OCTAVE_K3V4 = 12
    OCTAVE_K3V3 = 13
    OCTAVE_K3V3_COMPACT = 14
    CUSTOM = 12  # vLLM's alias of OCTAVE_K3V4 (an IntEnum member repeating a value is an alias)

    @property
    def is_per_token_head(self) -> bool:
        """Modes that keep one fp32 scale per token, head and K/V (vLLM counts INT4_PER_TOKEN_HEAD among them)."""
        return self in (KVQuantMode.INT8_PER_TOKEN_HEAD, KVQuantMode.FP8_PER_TOKEN_HEAD, KVQuantMode.INT4_PER_TOKEN_HEAD)

    @property
    def is_nvfp4(self) -> bool:
        """Packed fp4 values with one fp8 scale per 16 elements."""
        return self is KVQuantMode.NVFP4


LAID_OUT_QUANT_MODES = (KVQuantMode.NONE, KVQuantMode.FP8_PER_TENSOR, KVQuantMode.INT8_PER_TOKEN_HEAD,
                        KVQuantMode.FP8_PER_TOKEN_HEAD, KVQuantMode.NVFP4)
"""The modes whose pages this port computes (MEM-2.5 to MEM-2.7)."""


def kv_quant_mode_for(cache_dtype: str) -> KVQuantMode:
    """The mode a ``kv_cache_dtype`` string implies, as vLLM 0.33.0's ``get_kv_quant_mode`` maps it (no platform
    handler registered): the per-token-head names, ``nvfp4_ds_mla`` and ``ultraquant_4bit``, then any ``nvfp4*``,
    ``turboquant_<mode>`` and ``octave_<mode>`` (the member of that name: ValueError naming the text when there is
    none, where vLLM raises KeyError), any ``fp8*``; everything else (``auto``, ``float16``, ...) is NONE."""
    exact = {"int4_per_token_head": KVQuantMode.INT4_PER_TOKEN_HEAD,
             "int8_per_token_head": KVQuantMode.INT8_PER_TOKEN_HEAD,
             "fp8_per_token_head": KVQuantMode.FP8_PER_TOKEN_HEAD,
             "nvfp4_ds_mla": KVQuantMode.NVFP4_DS_MLA,
             "ultraquant_4bit": KVQuantMode.ULTRAQUANT_4BIT}
    if cache_dtype in exact:
        return exact[cache_dtype]
    if cache_dtype.startswith("nvfp4"):
        return KVQuantMode.NVFP4
    if cache_dtype.startswith(("turboquant_", "octave_")):
        member = KVQuantMode.__members__.get(cache_dtype.upper())
        if member is None:
            raise ValueError(f"kv_cache_dtype {cache_dtype!r} names no KVQuantMode member {cache_dtype.upper()!r}")
        return member
    if cache_dtype.startswith("fp8"):
        return KVQuantMode.FP8_PER_TENSOR
    return KVQuantMode.NONE


def nvfp4_bytes_per_head(width: int) -> int:
    """Bytes one head of ``width`` elements takes in NVFP4: two values a byte plus a scale per 16."""
    return width // 2 + width // 16


@dataclass(frozen=True)
class KVCacheSpec:
    """KV-cache format of one layer; ``block_size`` tokens make one page."""

    block_size: int

    def __post_init__(self) -> None:
        self._check_fields()
        self._check_page()

    def _check_fields(self) -> None:
        check_int(type(self).__name__, "block_size", self.block_size, minimum=1)

    def _check_page(self) -> None:
        """Subclasses with a padded page check it here, after every field is valid."""

    @property
    def page_size_bytes(self) -> int:
        """Bytes of one page (``block_size`` tokens) of this layer, padding included."""
        raise NotImplementedError

    def max_memory_usage_bytes(self, max_model_len: int, max_num_batched_tokens: int | None = None) -> int:
        """Most bytes one request of ``max_model_len`` tokens can hold in this layer."""
        raise NotImplementedError


def _check_usage_args(owner: str, max_model_len: int, max_num_batched_tokens: int | None) -> int:
    """Validate the max-usage arguments; return the batched-token count (``max_model_len`` when unset)."""
    check_int(owner, "max_model_len", max_model_len, minimum=1)
    check_optional_int(owner, "max_num_batched_tokens", max_num_batched_tokens, minimum=1)
    return max_model_len if max_num_batched_tokens is None else max_num_batched_tokens


@dataclass(frozen=True, kw_only=True)
class AttentionSpec(KVCacheSpec):
    """Paged K and V of one attention layer; the base page holds K and V of equal width."""

    num_kv_heads: int
    head_size: int
    dtype: torch.dtype | PlainDType
    kv_quant_mode: KVQuantMode = KVQuantMode.NONE
    page_size_padded: int | None = None

    def _check_fields(self) -> None:
        super()._check_fields()
        owner = type(self).__name__
        check_int(owner, "num_kv_heads", self.num_kv_heads, minimum=1)
        check_int(owner, "head_size", self.head_size, minimum=1)
        check_dtype(owner, "dtype", self.dtype)
        if not isinstance(self.kv_quant_mode, KVQuantMode):
            raise TypeError(f"{owner}.kv_quant_mode must be a KVQuantMode, got {self.kv_quant_mode!r}")
        if self.kv_quant_mode is not KVQuantMode.NONE and self.dtype.itemsize != 1:
            raise ValueError(
                f"{owner}.dtype must be a 1-byte dtype with kv_quant_mode={self.kv_quant_mode.name}, got {self.dtype}"
            )
        if self.kv_quant_mode not in LAID_OUT_QUANT_MODES:
            raise ValueError(f"{owner}.kv_quant_mode {self.kv_quant_mode.name} has no page layout in this port")
        if self.kv_quant_mode.is_nvfp4 and type(self) is not FullAttentionSpec:
            raise ValueError(f"{owner}.kv_quant_mode NVFP4 is only laid out for FullAttentionSpec, got {owner}")
        check_optional_int(owner, "page_size_padded", self.page_size_padded, minimum=1)

    def _check_page(self) -> None:
        unpadded = self.unpadded_page_size_bytes
        if self.page_size_padded is not None and self.page_size_padded < unpadded:
            raise ValueError(
                f"{type(self).__name__}.page_size_padded must be >= the real page size {unpadded}, "
                f"got {self.page_size_padded}"
            )

    @property
    def data_page_size_bytes(self) -> int:
        """K and V values of ``block_size`` tokens, scales not included: 2 * bs * num_kv_heads * head_size * s."""
        return 2 * self.block_size * self.num_kv_heads * self.head_size * self.dtype.itemsize

    @property
    def scale_bytes_per_page(self) -> int:
        """fp32 K and V scales per token and head, for the per-token-head quantization modes."""
        if not self.kv_quant_mode.is_per_token_head:
            return 0
        return 2 * self.block_size * self.num_kv_heads * FLOAT32_BYTES

    @property
    def real_page_size_bytes(self) -> int:
        """The unpadded page, per-token-head scales included (MEM-2.7), as vLLM 0.33.0's ``real_page_size_bytes``
        once the backend packed the scales inline (vllm/v1/kv_cache_interface.py, backends/triton_attn.py)."""
        return self.data_page_size_bytes + self.scale_bytes_per_page

    @property
    def unpadded_page_size_bytes(self) -> int:
        """The floor for ``page_size_padded``: the real page (vLLM's name for the same size)."""
        return self.real_page_size_bytes

    @property
    def page_size_bytes(self) -> int:
        if self.page_size_padded is not None:
            return self.page_size_padded
        return self.unpadded_page_size_bytes


@dataclass(frozen=True, kw_only=True)
class FullAttentionSpec(AttentionSpec):
    """Every token's K and V is kept; V may be narrower or wider than K (``head_size_v``).

    ``sliding_window``/``attention_chunk_size`` record a layer that computes locally but is cached in
    full (vLLM does this when the hybrid KV-cache manager is disabled).
    """

    head_size_v: int | None = None
    sliding_window: int | None = None
    attention_chunk_size: int | None = None

    def __post_init__(self) -> None:
        if self.head_size_v is None:
            object.__setattr__(self, "head_size_v", self.head_size)
        super().__post_init__()

    def _check_fields(self) -> None:
        super()._check_fields()
        owner = type(self).__name__
        self._check_head_size_v()
        check_optional_int(owner, "sliding_window", self.sliding_window, minimum=1)
        check_optional_int(owner, "attention_chunk_size", self.attention_chunk_size, minimum=1)
        if self.sliding_window is not None and self.attention_chunk_size is not None:
            raise ValueError(
                f"{owner} sets both sliding_window={self.sliding_window} and "
                f"attention_chunk_size={self.attention_chunk_size}; at most one may be set"
            )
        if self.kv_quant_mode.is_nvfp4:
            for name in ("head_size", "head_size_v"):
                width = getattr(self, name)
                if width % 16:
                    raise ValueError(f"{owner}.{name} must be a multiple of 16 for NVFP4, got {width}")
            if self.head_size_v != self.head_size:
                raise ValueError(f"{owner}.head_size_v must equal head_size ({self.head_size}) for NVFP4: K and V are "
                                 f"laid out as equal head slots, got {self.head_size_v}")

    def _check_head_size_v(self) -> None:
        check_int(type(self).__name__, "head_size_v", self.head_size_v, minimum=1)

    @property
    def data_page_size_bytes(self) -> int:
        """block_size * num_kv_heads * (K width + V width) bytes, with NVFP4's packed widths (K and V equal, as
        vLLM 0.33.0's FlashInfer backend requires: vllm/v1/attention/backends/flashinfer.py customize_spec)."""
        if self.kv_quant_mode.is_nvfp4:
            widths = nvfp4_bytes_per_head(self.head_size) + nvfp4_bytes_per_head(self.head_size_v)
        else:
            widths = self.head_size + self.head_size_v
        return self.block_size * self.num_kv_heads * widths * self.dtype.itemsize

    def max_memory_usage_bytes(self, max_model_len: int, max_num_batched_tokens: int | None = None) -> int:
        """Pages for every token of the longest request: cdiv(max_model_len, block_size) pages."""
        _check_usage_args(type(self).__name__, max_model_len, max_num_batched_tokens)
        return cdiv(max_model_len, self.block_size) * self.page_size_bytes


@dataclass(frozen=True, kw_only=True)
class MLAAttentionSpec(FullAttentionSpec):
    """Multi-head latent attention: one compressed latent per token, no separate K and V.

    ``head_size`` is the latent width (``kv_lora_rank + qk_rope_head_dim``, 576 for DeepSeek); ``head_size_v`` is 0,
    as vLLM 0.33.0's default (vllm/v1/kv_cache_interface.py MLAAttentionSpec), and no other width is accepted.
    """

    head_size_v: int | None = 0
    cache_dtype_str: str | None = None

    def __post_init__(self) -> None:
        if self.head_size_v is None:
            object.__setattr__(self, "head_size_v", 0)
        super().__post_init__()

    def _check_head_size_v(self) -> None:
        owner = type(self).__name__
        check_int(owner, "head_size_v", self.head_size_v, minimum=0)
        if self.head_size_v != 0:
            raise ValueError(f"{owner}.head_size_v must be 0 (an MLA cache holds one latent, no separate V), "
                             f"got {self.head_size_v}")

    def _check_fields(self) -> None:
        super()._check_fields()
        owner = type(self).__name__
        check_optional_str(owner, "cache_dtype_str", self.cache_dtype_str)
        if self.cache_dtype_str == FP8_DS_MLA:
            if self.head_size != FP8_DS_MLA_HEAD_SIZE:
                raise ValueError(
                    f"{owner}.head_size must be {FP8_DS_MLA_HEAD_SIZE} with cache_dtype_str={FP8_DS_MLA!r}, "
                    f"got {self.head_size}"
                )
            if self.num_kv_heads != 1:
                raise ValueError(f"{owner}.num_kv_heads must be 1 with {FP8_DS_MLA!r}, got {self.num_kv_heads}")
            if self.dtype.itemsize != 1:
                raise ValueError(f"{owner}.dtype must be a 1-byte dtype with {FP8_DS_MLA!r}, got {self.dtype}")

    @property
    def data_page_size_bytes(self) -> int:
        """block_size * num_kv_heads * head_size * dtype size (no K+V factor 2); fp8_ds_mla: 656 a token."""
        if self.cache_dtype_str == FP8_DS_MLA:
            return self.block_size * FP8_DS_MLA_BYTES_PER_TOKEN
        return self.block_size * self.num_kv_heads * self.head_size * self.dtype.itemsize


@dataclass(frozen=True, kw_only=True)
class SlidingWindowSpec(AttentionSpec):
    """Attention over the last ``sliding_window`` tokens; older pages can be freed."""

    sliding_window: int

    def _check_fields(self) -> None:
        super()._check_fields()
        check_int(type(self).__name__, "sliding_window", self.sliding_window, minimum=1)

    def max_memory_usage_bytes(self, max_model_len: int, max_num_batched_tokens: int | None = None) -> int:
        """(cdiv(min(window - 1 + batched tokens, max_model_len), block_size) + 1) pages.

        The extra page covers a window that starts mid-page. ``max_num_batched_tokens=None`` takes
        ``max_model_len``, the largest chunk a request can be scheduled in.
        """
        batched = _check_usage_args(type(self).__name__, max_model_len, max_num_batched_tokens)
        tokens = min(self.sliding_window - 1 + batched, max_model_len)
        return (cdiv(tokens, self.block_size) + 1) * self.page_size_bytes


@dataclass(frozen=True, kw_only=True)
class ChunkedLocalAttentionSpec(AttentionSpec):
    """Attention within fixed chunks of ``attention_chunk_size`` tokens (Llama-4 style)."""

    attention_chunk_size: int

    def _check_fields(self) -> None:
        super()._check_fields()
        check_int(type(self).__name__, "attention_chunk_size", self.attention_chunk_size, minimum=1)

    def max_memory_usage_bytes(self, max_model_len: int, max_num_batched_tokens: int | None = None) -> int:
        """cdiv(min(chunk + batched tokens, max_model_len), block_size) pages."""
        batched = _check_usage_args(type(self).__name__, max_model_len, max_num_batched_tokens)
        tokens = min(self.attention_chunk_size + batched, max_model_len)
        return cdiv(tokens, self.block_size) * self.page_size_bytes


@dataclass(frozen=True, kw_only=True)
class MambaSpec(KVCacheSpec):
    """Recurrent state of a Mamba / gated-delta-net layer: fixed-size tensors per sequence slot."""

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[torch.dtype | PlainDType, ...]
    page_size_padded: int | None = None
    mamba_type: str = "mamba2"
    mamba_cache_mode: str = "none"
    num_speculative_blocks: int = 0
    num_prefill_checkpoint_blocks: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.shapes, list):
            object.__setattr__(self, "shapes", tuple(tuple(s) if isinstance(s, list) else s for s in self.shapes))
        if isinstance(self.dtypes, list):
            object.__setattr__(self, "dtypes", tuple(self.dtypes))
        super().__post_init__()

    def _check_fields(self) -> None:
        super()._check_fields()
        owner = type(self).__name__
        if not isinstance(self.shapes, tuple) or not self.shapes:
            raise ValueError(f"{owner}.shapes must be a non-empty tuple of shapes, got {self.shapes!r}")
        if not isinstance(self.dtypes, tuple) or len(self.dtypes) != len(self.shapes):
            raise ValueError(
                f"{owner}.dtypes must be a tuple with one dtype per shape ({len(self.shapes)}), got {self.dtypes!r}"
            )
        for i, shape in enumerate(self.shapes):
            if not isinstance(shape, tuple) or not shape:
                raise ValueError(f"{owner}.shapes[{i}] must be a non-empty tuple of ints, got {shape!r}")
            for j, extent in enumerate(shape):
                check_int(owner, f"shapes[{i}][{j}]", extent, minimum=1)
            check_dtype(owner, f"dtypes[{i}]", self.dtypes[i])
        check_optional_int(owner, "page_size_padded", self.page_size_padded, minimum=1)
        if not isinstance(self.mamba_type, str):
            raise TypeError(f"{owner}.mamba_type must be a str, got {self.mamba_type!r}")
        check_choice(owner, "mamba_cache_mode", self.mamba_cache_mode, MAMBA_CACHE_MODES)
        check_int(owner, "num_speculative_blocks", self.num_speculative_blocks, minimum=0)
        check_int(owner, "num_prefill_checkpoint_blocks", self.num_prefill_checkpoint_blocks, minimum=0)

    def _check_page(self) -> None:
        if self.page_size_padded is not None and self.page_size_padded < self.real_page_size_bytes:
            raise ValueError(
                f"{type(self).__name__}.page_size_padded must be >= the real page size {self.real_page_size_bytes}, "
                f"got {self.page_size_padded}"
            )

    @property
    def real_page_size_bytes(self) -> int:
        """Sum over the state tensors of elements * dtype size."""
        return sum(prod(shape) * dtype.itemsize for shape, dtype in zip(self.shapes, self.dtypes))

    @property
    def page_size_bytes(self) -> int:
        if self.page_size_padded is not None:
            return self.page_size_padded
        return self.real_page_size_bytes

    def max_memory_usage_bytes(self, max_model_len: int, max_num_batched_tokens: int | None = None) -> int:
        """(1 + speculative) states; in ``align`` mode (2 + speculative + prefill checkpoints) states, as vLLM
        0.33.0's ``MambaSpec.max_memory_usage_bytes`` (vllm/v1/kv_cache_interface.py) (MEM-2.9)."""
        _check_usage_args(type(self).__name__, max_model_len, max_num_batched_tokens)
        if self.mamba_cache_mode == "align":
            return (2 + self.num_speculative_blocks + self.num_prefill_checkpoint_blocks) * self.page_size_bytes
        return (1 + self.num_speculative_blocks) * self.page_size_bytes


@dataclass(frozen=True)
class KVCacheGroupSpec:
    """Layers that share one spec and one block table."""

    layer_names: tuple[str, ...]
    kv_cache_spec: KVCacheSpec

    def __post_init__(self) -> None:
        names = tuple(self.layer_names) if isinstance(self.layer_names, list) else self.layer_names
        object.__setattr__(self, "layer_names", names)
        if not isinstance(names, tuple) or not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"KVCacheGroupSpec.layer_names must be a non-empty tuple of names, got {names!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"KVCacheGroupSpec.layer_names must not repeat a name, got {names!r}")
        if not isinstance(self.kv_cache_spec, KVCacheSpec):
            raise TypeError(f"KVCacheGroupSpec.kv_cache_spec must be a KVCacheSpec, got {self.kv_cache_spec!r}")


@dataclass(frozen=True)
class KVCacheTensor:
    """One allocation of ``size`` bytes, shared by the named layers."""

    size: int
    shared_by: tuple[str, ...]

    def __post_init__(self) -> None:
        check_int("KVCacheTensor", "size", self.size, minimum=0)
        names = tuple(self.shared_by) if isinstance(self.shared_by, list) else self.shared_by
        object.__setattr__(self, "shared_by", names)
        if not isinstance(names, tuple) or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"KVCacheTensor.shared_by must be a tuple of layer names, got {names!r}")


@dataclass(frozen=True)
class KVCacheConfig:
    """The KV pool of one worker: block count, tensors and groups.

    ``per_layer_attn_specs`` is the heterogeneous-KV form (one entry per decoder layer, ``None`` for a
    layer without attention KV such as a GDN layer); when non-empty it, not the groups, sizes a block.
    """

    num_blocks: int
    kv_cache_tensors: tuple[KVCacheTensor, ...]
    kv_cache_groups: tuple[KVCacheGroupSpec, ...]
    per_layer_attn_specs: tuple[AttentionSpec | None, ...] = ()

    def __post_init__(self) -> None:
        for name in ("kv_cache_tensors", "kv_cache_groups", "per_layer_attn_specs"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
            elif not isinstance(value, tuple):
                raise TypeError(f"KVCacheConfig.{name} must be a tuple, got {value!r}")
        check_int("KVCacheConfig", "num_blocks", self.num_blocks, minimum=0)
        for i, tensor in enumerate(self.kv_cache_tensors):
            if not isinstance(tensor, KVCacheTensor):
                raise TypeError(f"KVCacheConfig.kv_cache_tensors[{i}] must be a KVCacheTensor, got {tensor!r}")
        for i, group in enumerate(self.kv_cache_groups):
            if not isinstance(group, KVCacheGroupSpec):
                raise TypeError(f"KVCacheConfig.kv_cache_groups[{i}] must be a KVCacheGroupSpec, got {group!r}")
        for i, spec in enumerate(self.per_layer_attn_specs):
            if spec is not None and not isinstance(spec, AttentionSpec):
                raise TypeError(
                    f"KVCacheConfig.per_layer_attn_specs[{i}] must be an AttentionSpec or None, got {spec!r}"
                )


def kv_bytes_per_block(config: KVCacheConfig) -> int:
    """Bytes one KV block costs across all layers: what a byte budget is divided by (MEM-2.1).

    Per-layer specs when present (``None`` entries skipped); else each attention group's page times
    its layer count. Mamba/GDN state is per sequence slot, not per block, and counts 0.
    """
    if not isinstance(config, KVCacheConfig):
        raise TypeError(f"kv_bytes_per_block needs a KVCacheConfig, got {config!r}")
    if config.per_layer_attn_specs:
        return sum(spec.page_size_bytes for spec in config.per_layer_attn_specs if spec is not None)
    return sum(
        group.kv_cache_spec.page_size_bytes * len(group.layer_names)
        for group in config.kv_cache_groups
        if isinstance(group.kv_cache_spec, AttentionSpec)
    )
