"""vLLM's KV-cache specs as plain data: page sizes of every spec kind and max memory usage (ROAD-V1-MEM M2).

A SPEC is the mapping the ROAD-V1-MEM cases use (gates/rows/road_v1_mem/operations.yaml, build.py):
``{kind: full | mla | sliding_window | chunked_local | mamba, block_size, ...}`` in vLLM's field names, dtypes as
torch names, ``kv_quant_mode`` as a ``KVQuantMode`` member name. Extra kinds vLLM has and the port does not:
``sink_full``, ``sliding_window_mla``, ``cross_attention``, ``encoder_only``.

Two layouts of a spec are offered:

- ``layout="raw"``: the dataclass vLLM builds from these fields, nothing else (vllm/v1/kv_cache_interface.py).
  In vLLM 0.33.0 the quantization mode does not change a raw page: the scales, NVFP4's packing and fp8_ds_mla's
  656-byte entry come from ``state_content_bytes`` / ``num_head_slots``, which the attention layer and backend set.
- ``layout="backend"`` (default): what vLLM allocates for such a layer. An MLA spec with ``cache_dtype_str``
  fp8_ds_mla / nvfp4_ds_mla is built by ``MLAAttention.get_kv_cache_spec``
  (vllm/model_executor/layers/attention/mla_attention.py), which sets the entry size; then the backend's
  ``customize_spec`` runs through ``customize_attention_spec`` (vllm/v1/worker/utils.py): MLA layers get
  ``MLACommonBackend`` (mla_attention.py; inline fp32 scales of per-token-head modes), NVFP4 layers
  ``FlashInferBackend`` (vllm/v1/attention/backends/flashinfer.py; the only backend that packs NVFP4), the others
  ``TritonAttentionBackend`` (vllm/v1/attention/backends/triton_attn.py; inline fp32 scales of per-token-head
  modes). FlashInfer's module imports the CUDA-only ``flashinfer`` package, so its ``customize_spec`` is read from
  vLLM's installed source file and run on its own (see ``_flashinfer_customize_spec``).
"""
from __future__ import annotations

import ast
import dataclasses
import importlib.util
from functools import lru_cache
from typing import Any, Callable, Mapping

import upstream  # noqa: F401  (environment before vLLM's import)
from upstream._config import dtype, vllm_config

from vllm.model_executor.layers.attention.mla_attention import MLAAttention, MLACommonBackend
from vllm.utils.torch_utils import get_dtype_size, nvfp4_kv_cache_full_dim
from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum
from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend
from vllm.v1.kv_cache_interface import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    KVQuantMode,
    MambaSpec,
    MLAAttentionSpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
)
from vllm.v1.worker.utils import customize_attention_spec

KINDS: dict[str, type] = {
    "full": FullAttentionSpec,
    "mla": MLAAttentionSpec,
    "sliding_window": SlidingWindowSpec,
    "chunked_local": ChunkedLocalAttentionSpec,
    "mamba": MambaSpec,
    "sink_full": SinkFullAttentionSpec,
    "sliding_window_mla": SlidingWindowMLASpec,
    "cross_attention": CrossAttentionSpec,
    "encoder_only": EncoderOnlyAttentionSpec,
}
"""Case kind -> vLLM spec class (vllm/v1/kv_cache_interface.py)."""

LAYOUTS = ("backend", "raw")
DS_MLA_CACHE_DTYPES = ("fp8_ds_mla", "nvfp4_ds_mla")


@lru_cache(maxsize=1)
def _flashinfer_customize_spec() -> Callable[[Any], Any]:
    """``FlashInferBackend.customize_spec`` of the installed vLLM, without importing the CUDA-only ``flashinfer``.

    The method's source is taken from vllm/v1/attention/backends/flashinfer.py as installed and compiled with the
    names it uses bound to vLLM's own objects (``replace``, ``nvfp4_kv_cache_full_dim``, ``get_dtype_size``), so a
    change of the method in another release is what runs.
    """
    spec = importlib.util.find_spec("vllm.v1.attention.backends.flashinfer")
    if spec is None or spec.origin is None:
        raise RuntimeError("vllm/v1/attention/backends/flashinfer.py is not installed")
    with open(spec.origin, encoding="utf-8") as handle:
        source = handle.read()
    module = ast.parse(source, filename=spec.origin)
    for node in module.body:
        if isinstance(node, ast.ClassDef) and node.name == "FlashInferBackend":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "customize_spec":
                    item.decorator_list = []
                    item.returns = None
                    for arg in item.args.args:
                        arg.annotation = None
                    code = compile(ast.Module(body=[item], type_ignores=[]), spec.origin, "exec")
                    namespace: dict[str, Any] = {
                        "replace": dataclasses.replace,
                        "nvfp4_kv_cache_full_dim": nvfp4_kv_cache_full_dim,
                        "get_dtype_size": get_dtype_size,
                        "KVQuantMode": KVQuantMode,
                    }
                    exec(code, namespace)  # noqa: S102 - vLLM's own method text
                    method = namespace["customize_spec"]
                    return lambda attention_spec: method(None, attention_spec)
    raise RuntimeError(f"FlashInferBackend.customize_spec not found in {spec.origin}")


class _FlashInferNVFP4:
    """Stands in for ``FlashInferBackend`` in ``customize_attention_spec``: its customize_spec (from vLLM's source)
    and its kernel block sizes for a spec without large pages (``[16, 32, 64]``, flashinfer.py)."""

    @staticmethod
    def customize_spec(spec: Any) -> Any:
        return _flashinfer_customize_spec()(spec)

    @staticmethod
    def get_supported_kernel_block_sizes(kv_cache_spec: Any = None) -> list[int]:
        return [16, 32, 64]


def _fields(data: Mapping[str, Any]) -> tuple[type, dict[str, Any]]:
    """The spec class and its constructor fields for a SPEC mapping."""
    fields = dict(data)
    try:
        kind = fields.pop("kind")
    except KeyError:
        raise ValueError(f"a SPEC needs a kind, got {data!r}") from None
    if kind not in KINDS:
        raise ValueError(f"unknown SPEC kind {kind!r}; known: {sorted(KINDS)}")
    if "dtype" in fields:
        fields["dtype"] = dtype(fields["dtype"])
    if "dtypes" in fields:
        fields["dtypes"] = tuple(dtype(name) for name in fields["dtypes"])
    if "shapes" in fields:
        fields["shapes"] = tuple(tuple(shape) for shape in fields["shapes"])
    if "kv_quant_mode" in fields:
        fields["kv_quant_mode"] = KVQuantMode[fields["kv_quant_mode"]]
    if "mamba_type" in fields:
        name = str(fields["mamba_type"]).upper()
        fields["mamba_type"] = MambaAttentionBackendEnum[name]
    return KINDS[kind], fields


def _ds_mla_spec(fields: dict[str, Any]) -> Any:
    """``MLAAttention.get_kv_cache_spec`` (mla_attention.py) for a ds_mla cache dtype, on a stand-in layer.

    The layer method takes the cache dtype string, the latent width and the block size; it fixes one KV head,
    the storage dtype (uint8) and the quant mode from the string, and sets ``state_content_bytes``. The SPEC's
    ``page_size_padded`` is applied after, as vLLM's unify step does.
    """
    from types import SimpleNamespace

    layer = SimpleNamespace(
        kv_cache_dtype=fields["cache_dtype_str"], head_size=fields["head_size"], sliding_window=None,
        topk_buffer_width=None, indexer=None, non_causal_multi_token_decode=False,
    )
    config = vllm_config(block_size=fields["block_size"])
    spec = MLAAttention.get_kv_cache_spec(layer, config)
    if spec.block_size != fields["block_size"]:  # the CPU platform may have moved the config's block size
        spec = dataclasses.replace(spec, block_size=fields["block_size"])
    if fields.get("page_size_padded") is not None:
        spec = dataclasses.replace(spec, page_size_padded=fields["page_size_padded"])
    return spec


def build_spec(data: Mapping[str, Any], layout: str = "backend") -> Any:
    """The vLLM spec object a SPEC mapping describes (construction errors are vLLM's; see the module docstring)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    cls, fields = _fields(data)
    if layout == "backend" and cls is MLAAttentionSpec and fields.get("cache_dtype_str") in DS_MLA_CACHE_DTYPES:
        return _ds_mla_spec(fields)
    spec = cls(**fields)
    if layout == "raw" or not isinstance(spec, AttentionSpec):
        return spec
    if isinstance(spec, (MLAAttentionSpec, SlidingWindowMLASpec)):
        backend: Any = MLACommonBackend
    elif spec.kv_quant_mode.is_nvfp4:
        backend = _FlashInferNVFP4
    else:
        backend = TritonAttentionBackend
    return customize_attention_spec(backend, spec)


def page_size_bytes(spec: Mapping[str, Any], layout: str = "backend") -> int:
    """``spec.page_size_bytes`` (vllm/v1/kv_cache_interface.py): padded page when set, else the real page."""
    return int(build_spec(spec, layout).page_size_bytes)


def real_page_size_bytes(spec: Mapping[str, Any], layout: str = "backend") -> int:
    """``spec.real_page_size_bytes`` (vllm/v1/kv_cache_interface.py): the unpadded page, packed content included."""
    return int(build_spec(spec, layout).real_page_size_bytes)


def spec_sizes(spec: Mapping[str, Any], layout: str = "backend") -> dict[str, Any]:
    """Page size, real page size and the packing vLLM chose, as one mapping (vllm/v1/kv_cache_interface.py)."""
    built = build_spec(spec, layout)
    out: dict[str, Any] = {"page_size_bytes": int(built.page_size_bytes),
                           "real_page_size_bytes": int(built.real_page_size_bytes),
                           "class": type(built).__name__}
    if isinstance(built, AttentionSpec):
        out.update(num_heads=int(built.num_heads), state_content_size_bytes=int(built.state_content_size_bytes),
                   head_size_v=int(built.head_size_v), kv_quant_mode=built.kv_quant_mode.name,
                   kv_quant_mode_value=int(built.kv_quant_mode))
    return out


def max_memory_usage_bytes(spec: Mapping[str, Any], max_model_len: int, max_num_batched_tokens: int | None = None,
                           mamba_cache_mode: str | None = None, decode_context_parallel_size: int = 1,
                           max_num_encoder_input_tokens: int | None = None, layout: str = "backend") -> int:
    """``spec.max_memory_usage_bytes(vllm_config)`` (vllm/v1/kv_cache_interface.py) on a real VllmConfig.

    ``max_num_batched_tokens=None`` is ``max_model_len`` (so ``max_in_flight_tokens`` = it, one batch in flight).
    The Mamba cache mode vLLM reads is the *config's* (``cache_config.mamba_cache_mode``), not the spec's field;
    ``mamba_cache_mode=None`` takes the SPEC's own ``mamba_cache_mode`` (default "none") for the config. A mode
    ``CacheConfig`` does not accept (0.33.0 knows "none" and "align") raises vLLM's validation error.
    """
    built = build_spec(spec, layout)
    if mamba_cache_mode is None:
        mamba_cache_mode = spec.get("mamba_cache_mode", "none")
    config = vllm_config(max_model_len=max_model_len, max_num_batched_tokens=max_num_batched_tokens,
                         mamba_cache_mode=mamba_cache_mode, decode_context_parallel_size=decode_context_parallel_size,
                         max_num_encoder_input_tokens=max_num_encoder_input_tokens)
    return int(built.max_memory_usage_bytes(config))


def kv_quant_modes_of_spec_kinds() -> dict[str, list[str]]:
    """For information: the quant-mode names a raw spec of each attention kind can be built with (all of them:
    0.33.0's spec classes do not check the mode against the kind or the dtype)."""
    return {kind: [mode.name for mode in KVQuantMode] for kind, cls in KINDS.items() if issubclass(cls, AttentionSpec)}
