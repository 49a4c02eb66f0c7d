"""Oracle for KV bytes per block (MEM-2.1 to MEM-2.9): allocate the runner's KV tensors on torch's meta device.

Layouts follow the attention backends, not the spec formulas: vllm/v1/attention/backends/flash_attn.py
(``(2, num_blocks, block_size, kv_heads, head_size)``), vllm/v1/attention/backends/flashinfer.py (NVFP4: K and V
in head slots of one width), vllm/v1/attention/backends/mla/ (one latent row per token, its V width unread; FlashMLA's fp8 entry), vllm/v1/worker/gpu_model_runner.py (raw per-layer buffers, padded
pages) and the Mamba state cache (one state per sequence slot). Bytes are measured from the storages.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

META = torch.device("meta")
PAGED_FORMATS = ("plain", "fp8_per_tensor", "per_token_head", "nvfp4", "fp8_ds_mla")
NVFP4_GROUP = 16  # elements sharing one fp8 scale
FLASHMLA_FP8_NOPE = 512  # latent (NoPE) width of DeepSeek's MLA, stored as fp8
FLASHMLA_FP8_ROPE = 64  # rotary part, kept in bf16
FLASHMLA_FP8_TILE = 128  # NoPE elements per fp32 scale


@dataclass(frozen=True)
class PagedLayer:
    """A layer whose KV lives in blocks of ``block_size`` tokens.

    ``backend`` is ``flash_attn`` (separate K and V rows) or ``mla`` (one latent row per token).
    ``storage`` is the element dtype of the cached values; ``fmt`` how they are quantized.
    ``page_bytes`` (optional) is the raw bytes the runner reserves per block, like a padded page.
    """

    name: str
    backend: str
    block_size: int
    num_kv_heads: int
    head_size: int
    head_size_v: int
    storage: torch.dtype
    fmt: str = "plain"
    page_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.backend not in ("flash_attn", "mla"):
            raise ValueError(f"PagedLayer.backend must be 'flash_attn' or 'mla', got {self.backend!r}")
        if self.fmt not in PAGED_FORMATS:
            raise ValueError(f"PagedLayer.fmt must be one of {PAGED_FORMATS}, got {self.fmt!r}")


@dataclass(frozen=True)
class StateLayer:
    """A recurrent layer (Mamba, gated delta-net): fixed-size state tensors per sequence slot.

    ``slot_bytes`` (optional) is the raw bytes reserved per slot, like a padded Mamba page.
    """

    name: str
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[torch.dtype, ...]
    slot_bytes: int | None = None


def _empty(*shape: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device=META)


def _kv_rows(layer: PagedLayer, n: int) -> list[torch.Tensor]:
    """The K and V tensors of a flash-attention layer for ``n`` blocks, in its storage format."""
    bs, heads = layer.block_size, layer.num_kv_heads
    if layer.fmt == "nvfp4":
        if layer.head_size != layer.head_size_v:  # FlashInfer's NVFP4 cache: 2 * heads slots of one width
            raise ValueError(f"NVFP4 stores K and V in head slots of one width, got K {layer.head_size} and "
                             f"V {layer.head_size_v}")
        tensors = []
        for width in (layer.head_size, layer.head_size_v):
            if width % NVFP4_GROUP:
                raise ValueError(f"NVFP4 needs head widths that are multiples of {NVFP4_GROUP}, got {width}")
            tensors.append(_empty(n, bs, heads, width // 2, dtype=torch.uint8))  # two fp4 values a byte
            tensors.append(_empty(n, bs, heads, width // NVFP4_GROUP, dtype=torch.float8_e4m3fn))
        return tensors
    if layer.head_size == layer.head_size_v:
        tensors = [_empty(2, n, bs, heads, layer.head_size, dtype=layer.storage)]
    else:
        tensors = [_empty(n, bs, heads, layer.head_size, dtype=layer.storage),
                   _empty(n, bs, heads, layer.head_size_v, dtype=layer.storage)]
    if layer.fmt == "per_token_head":
        tensors.append(_empty(2, n, bs, heads, dtype=torch.float32))
    elif layer.fmt == "fp8_per_tensor":
        tensors += [_empty(dtype=torch.float32), _empty(dtype=torch.float32)]  # k_scale, v_scale
    return tensors


def _latent_rows(layer: PagedLayer, n: int) -> list[torch.Tensor]:
    """The MLA cache for ``n`` blocks: one latent row per token (no separate V)."""
    bs = layer.block_size
    if layer.fmt == "fp8_ds_mla":
        if layer.num_kv_heads != 1 or layer.head_size != FLASHMLA_FP8_NOPE + FLASHMLA_FP8_ROPE:
            raise ValueError(f"fp8_ds_mla stores one {FLASHMLA_FP8_NOPE}+{FLASHMLA_FP8_ROPE} latent, got "
                             f"{layer.num_kv_heads} heads of {layer.head_size}")
        return [_empty(n, bs, FLASHMLA_FP8_NOPE, dtype=torch.uint8),
                _empty(n, bs, FLASHMLA_FP8_NOPE // FLASHMLA_FP8_TILE, dtype=torch.float32),
                _empty(n, bs, FLASHMLA_FP8_ROPE, dtype=torch.bfloat16)]
    if layer.fmt == "nvfp4":
        raise ValueError("NVFP4 has no latent (MLA) layout")
    tensors = [_empty(n, bs, layer.num_kv_heads, layer.head_size, dtype=layer.storage)]
    if layer.fmt == "per_token_head":
        tensors.append(_empty(2, n, bs, layer.num_kv_heads, dtype=torch.float32))
    return tensors


def _nbytes(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.untyped_storage().nbytes() for t in tensors)


def layer_tensors(layer: PagedLayer | StateLayer, num_blocks: int, num_slots: int) -> list[torch.Tensor]:
    """What the runner allocates for one layer with ``num_blocks`` blocks and ``num_slots`` sequence slots."""
    if isinstance(layer, StateLayer):
        states = [_empty(num_slots, *shape, dtype=dtype) for shape, dtype in zip(layer.shapes, layer.dtypes)]
        if layer.slot_bytes is None:
            return states
        if layer.slot_bytes * num_slots < _nbytes(states):
            raise ValueError(f"layer {layer.name}: a padded slot of {layer.slot_bytes} bytes cannot hold its state")
        return [_empty(num_slots, layer.slot_bytes, dtype=torch.uint8)]
    build = _latent_rows if layer.backend == "mla" else _kv_rows
    tensors = build(layer, num_blocks)
    if layer.page_bytes is None:
        return tensors
    needed = _nbytes(build(layer, 1)) - _nbytes(build(layer, 0))
    if layer.page_bytes < needed:
        raise ValueError(f"layer {layer.name}: a padded page of {layer.page_bytes} bytes cannot hold the {needed} "
                         "bytes one block needs")
    per_layer = _nbytes(tensors) - needed * num_blocks  # scalar scales and the like, not per block
    return [_empty(num_blocks * layer.page_bytes + per_layer, dtype=torch.uint8)]  # raw buffer, viewed per block


def allocated_bytes(layers: Sequence[PagedLayer | StateLayer], num_blocks: int, num_slots: int = 4) -> int:
    """Bytes of every tensor the runner would allocate for these layers."""
    names = [layer.name for layer in layers]
    if len(set(names)) != len(names):
        raise ValueError(f"layer names must be unique, got {names}")
    return sum(_nbytes(layer_tensors(layer, num_blocks, num_slots)) for layer in layers)


def marginal_bytes_per_block(layers: Sequence[PagedLayer | StateLayer], low: int = 3, high: int = 7) -> int:
    """How many more bytes one more block costs: measured between two block counts."""
    grown = allocated_bytes(layers, high) - allocated_bytes(layers, low)
    if grown % (high - low):
        raise ValueError(f"allocation does not grow linearly in blocks: {grown} bytes over {high - low} blocks")
    return grown // (high - low)


def marginal_bytes_per_slot(layers: Sequence[PagedLayer | StateLayer], low: int = 2, high: int = 5) -> int:
    """How many more bytes one more sequence slot costs (the per-sequence state)."""
    grown = allocated_bytes(layers, 4, num_slots=high) - allocated_bytes(layers, 4, num_slots=low)
    return grown // (high - low)


def page_bytes_of_layer(layer: PagedLayer | StateLayer) -> int:
    """One layer's unit of allocation: bytes per block when paged, bytes per sequence slot for state."""
    if isinstance(layer, StateLayer):
        return marginal_bytes_per_slot([layer])
    return marginal_bytes_per_block([layer])
