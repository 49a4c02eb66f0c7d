"""vLLM's model geometry for a Hugging Face config.json as plain data (ROAD-V1-MEM M2, model-bytes-per-block).

``ModelConfig`` (vllm/config/model.py) reads the config from a local folder (upstream/_config.py writes it; nothing
is downloaded); ``VllmConfig`` (vllm/config/vllm.py) checks it against a ``ParallelConfig`` of the given TP size,
which is where vLLM refuses a head count TP does not divide (``verify_with_parallel_config``). The per-rank figures
are ModelConfig's getters. vLLM sizes a layer's KV from the model's attention modules, which are not built here;
:func:`layer_specs` therefore builds one spec per layer as those modules would from these getters, the text
config's ``layer_types`` (which vLLM's Gemma-2/3, Llama and Qwen3-Next model files read) and the model class's
Mamba state shapes, and :func:`pool_of` asks vLLM's own grouping what one pool block costs
(vllm/v1/core/kv_cache_planning.py ``get_kv_cache_groups`` / ``_pool_bytes_per_block``). upstream/gates_geometry.py
turns these into the model-bytes-per-block gates' oracles.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

import upstream  # noqa: F401  (environment before vLLM's import)
from upstream._config import model_folder


_ARCHITECTURES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "deepseek_v2": "DeepseekV2ForCausalLM",
                  "deepseek_v3": "DeepseekV3ForCausalLM", "qwen3_next": "Qwen3NextForCausalLM",
                  "gemma2": "Gemma2ForCausalLM", "gemma3_text": "Gemma3ForCausalLM"}
"""vLLM's model class for a generated config's ``model_type`` (vllm/model_executor/models/registry.py); a fixture
names its own ``architectures``."""
_VOCAB = 1024


def complete_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with what ModelConfig needs to resolve the model class and that a generated config may lack
    (``architectures`` by model_type, a vocabulary size); the geometry fields are left as given."""
    full = dict(config)
    if not full.get("architectures"):
        model_type = full.get("model_type", "llama")
        if model_type not in _ARCHITECTURES:
            raise ValueError(f"no vLLM architecture known for model_type {model_type!r}")
        full["architectures"] = [_ARCHITECTURES[model_type]]
    full.setdefault("vocab_size", _VOCAB)
    return full


def _vllm_config(config: Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                 kv_cache_dtype: str, dtype: str = "auto") -> Any:
    """A real VllmConfig; ``dtype`` is ModelConfig's ``--dtype``. ``"checkpoint"`` keeps a float32 checkpoint at
    float32 (``--dtype float32``), which ``auto`` would downcast (vllm/config/model.py ``_resolve_auto_dtype``), and
    is ``auto`` otherwise (a float16 Gemma checkpoint then runs in bfloat16, of the same width)."""
    from vllm.config import CacheConfig, ModelConfig, ParallelConfig, VllmConfig

    full = complete_config(config)
    if dtype == "checkpoint":
        dtype = "float32" if str(full.get("torch_dtype", full.get("dtype"))) == "float32" else "auto"
    folder = model_folder(json.dumps(full, sort_keys=True))
    model_config = ModelConfig(model=folder, skip_tokenizer_init=True, dtype=dtype)
    parallel_config = ParallelConfig(tensor_parallel_size=tensor_parallel_size)
    cache_config = CacheConfig(block_size=block_size, cache_dtype=kv_cache_dtype)
    vllm_config = VllmConfig(model_config=model_config, parallel_config=parallel_config, cache_config=cache_config)
    vllm_config.cache_config.block_size = block_size
    return vllm_config


def geometry(config: Mapping[str, Any], tensor_parallel_size: int = 1, block_size: int = 16,
             kv_cache_dtype: str = "auto", dtype: str = "auto") -> dict[str, Any]:
    """Per-rank geometry from ``ModelConfig`` / ``VllmConfig`` (vllm/config/model.py, vllm/config/vllm.py):
    ``{num_kv_heads, total_num_kv_heads, num_attention_heads, head_size, num_layers, use_mla, dtype,
    sliding_window, is_hybrid, max_model_len, layer_types}``; vLLM's refusal (ValueError) propagates."""
    vllm_config = _vllm_config(config, tensor_parallel_size, block_size, kv_cache_dtype, dtype)
    model = vllm_config.model_config
    parallel = vllm_config.parallel_config
    return {
        "num_kv_heads": int(model.get_num_kv_heads(parallel)),
        "total_num_kv_heads": int(model.get_total_num_kv_heads()),
        "num_attention_heads": int(model.get_num_attention_heads(parallel)),
        "head_size": int(model.get_head_size()),
        "num_layers": int(model.get_num_layers(parallel)),
        "use_mla": bool(model.use_mla),
        "dtype": str(model.dtype).removeprefix("torch."),
        "sliding_window": model.get_sliding_window(),
        "is_hybrid": bool(model.is_hybrid),
        "max_model_len": int(model.max_model_len),
        "layer_types": list(_layer_kinds(model, int(model.get_num_layers(parallel)))),
    }


def refusal(config: Mapping[str, Any], tensor_parallel_size: int) -> str | None:
    """vLLM's message when it refuses the model at this TP size (vllm/config/model.py), else None."""
    try:
        _vllm_config(config, tensor_parallel_size, 16, "auto")
    except ValueError as exc:
        return message_of(exc)
    return None


def config_refusal(exc: BaseException) -> str | None:
    """The text of transformers' refusal of a config.json field while vLLM reads it (huggingface_hub's
    ``StrictDataclass*ValidationError``: a config class's validator such as ``validate_rope``,
    transformers/modeling_rope_utils.py, or a field's type, e.g. Gemma2Config's int ``head_dim``), else None.
    These are not ValueErrors; the gates' views report them as one."""
    if type(exc).__module__.startswith("huggingface_hub") and "ValidationError" in type(exc).__name__:
        return " ".join(str(exc).split())
    return None


def message_of(exc: ValueError) -> str:
    """A ValueError's text; for pydantic's ValidationError (VllmConfig's validators), its validators' messages."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            return "; ".join(str(e.get("msg", "")).removeprefix("Value error, ") for e in errors())
        except Exception:  # noqa: BLE001
            pass
    return str(exc)


def _layer_kinds(model: Any, num_layers: int) -> tuple[str, ...]:
    """Each decoder layer's mixer as vLLM's model files choose it: the text config's ``layer_types`` (transformers
    fills it for Gemma-2/3 and Qwen3-Next; vllm/model_executor/models/gemma2.py, gemma3.py, llama.py and
    qwen3_next.py read it), 'sliding_attention' layers getting the config's window as their per-layer window.
    Without ``layer_types`` every layer is full attention: the Attention layer then falls back to
    ``cache_config.sliding_window`` (vllm/model_executor/layers/attention/attention.py), which nothing sets in
    0.33.0."""
    types = getattr(model.hf_text_config, "layer_types", None)
    if not types:
        return ("full_attention",) * num_layers
    return tuple(str(t) for t in types[:num_layers])


@dataclass(frozen=True)
class Layers:
    """vLLM's per-layer KV specs of one rank (``{layer name: KVCacheSpec}``) and the config they were built on."""

    vllm_config: Any
    specs: dict[str, Any]
    kinds: tuple[str, ...]


def layer_specs(config: Mapping[str, Any], tensor_parallel_size: int = 1, block_size: int = 16,
                kv_cache_dtype: str = "auto", dtype: str = "checkpoint", align_hybrid: bool = False) -> Layers:
    """One KVCacheSpec per layer as vLLM's layers build them (vllm/model_executor/layers/attention/attention.py
    ``Attention.get_kv_cache_spec``, mla_attention.py, vllm/model_executor/layers/mamba/abstract.py), from
    ModelConfig's per-rank getters: FullAttentionSpec, SlidingWindowSpec for 'sliding_attention' layers,
    MLAAttentionSpec for MLA models (each as the backend lays it out: upstream/kv_specs.py ``build_spec``), MambaSpec
    for 'linear_attention' layers with the model class's own state shapes and dtypes
    (``get_mamba_state_shape_from_config``). ``align_hybrid`` first runs the platform's
    ``_align_hybrid_block_size`` (vllm/platforms/interface.py) with the Triton backend, as the engine does for a
    hybrid model: the block size may grow and the Mamba page is padded to the attention page. The KV cache layout
    is resolved as the engine core resolves it."""
    from vllm.model_executor.models import ModelRegistry
    from vllm.platforms import current_platform
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend
    from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
    from vllm.v1.kv_cache_interface import MambaSpec, get_kv_quant_mode

    from upstream import kv_specs

    vllm_config = _vllm_config(config, tensor_parallel_size, block_size, kv_cache_dtype, dtype)
    model, parallel, cache = vllm_config.model_config, vllm_config.parallel_config, vllm_config.cache_config
    num_layers = model.get_num_layers(parallel)
    kinds = _layer_kinds(model, num_layers)
    if align_hybrid and model.is_hybrid:
        current_platform._align_hybrid_block_size(vllm_config, TritonAttentionBackend)
    block = cache.block_size
    common = {"block_size": block, "dtype": str(kv_cache_dtype_str_to_dtype(kv_cache_dtype, model)).removeprefix("torch."),
              "kv_quant_mode": get_kv_quant_mode(kv_cache_dtype).name, "head_size": model.get_head_size()}
    window = model.get_sliding_window()
    mamba = None
    specs: dict[str, Any] = {}
    for i, kind in enumerate(kinds):
        if kind == "linear_attention":
            if mamba is None:
                cls, _ = ModelRegistry.resolve_model_cls(model.architecture, model_config=model)
                mamba = MambaSpec(block_size=block, shapes=cls.get_mamba_state_shape_from_config(vllm_config),
                                  dtypes=cls.get_mamba_state_dtype_from_config(vllm_config),
                                  page_size_padded=cache.mamba_page_size_padded)
            specs[f"model.layers.{i}.linear_attn"] = mamba
        elif model.use_mla:
            specs[f"model.layers.{i}.self_attn.attn"] = kv_specs.build_spec(
                {"kind": "mla", **common, "num_kv_heads": 1, "cache_dtype_str": kv_cache_dtype})
        elif kind == "sliding_attention" and window:
            specs[f"model.layers.{i}.self_attn.attn"] = kv_specs.build_spec(
                {"kind": "sliding_window", **common, "num_kv_heads": model.get_num_kv_heads(parallel),
                 "sliding_window": window})
        else:
            specs[f"model.layers.{i}.self_attn.attn"] = kv_specs.build_spec(
                {"kind": "full", **common, "num_kv_heads": model.get_num_kv_heads(parallel)})
    layouts = [layout.name for layout in get_supported_kv_cache_layouts([TritonAttentionBackend])]
    resolve_kv_cache_layout(vllm_config, [layouts], list(specs.values()))
    return Layers(vllm_config, specs, kinds)


def pool_of(layers: Layers) -> dict[str, Any]:
    """vLLM's grouping of ``layers`` and one pool block's bytes (vllm/v1/core/kv_cache_planning.py
    ``get_kv_cache_groups``, ``_pool_bytes_per_block``): ``{pool_bytes_per_block, block_size, groups: [{layers,
    page_size_bytes, kind, bytes}]}``, ``bytes`` a group's summed per-layer pages."""
    from vllm.v1.core import kv_cache_planning

    groups = kv_cache_planning.get_kv_cache_groups(layers.vllm_config, dict(layers.specs))
    rows = []
    for group in groups:
        per_layer = [kv_cache_planning._get_per_layer_spec(group, name) for name in group.layer_names]
        rows.append({"layers": len(group.layer_names), "page_size_bytes": int(group.kv_cache_spec.page_size_bytes),
                     "kind": type(group.kv_cache_spec).__name__,
                     "bytes": int(sum(spec.page_size_bytes for spec in per_layer))})
    pool = int(kv_cache_planning._pool_bytes_per_block(layers.vllm_config, groups)) if groups else 0
    return {"pool_bytes_per_block": pool, "block_size": int(layers.vllm_config.cache_config.block_size),
            "groups": rows}


def pool_bytes_per_block(config: Mapping[str, Any], tensor_parallel_size: int = 1, block_size: int = 16,
                         kv_cache_dtype: str = "auto", dtype: str = "checkpoint") -> dict[str, Any]:
    """What one block of vLLM's shared KV pool costs for this model (:func:`pool_of` over :func:`layer_specs`,
    a hybrid Mamba model's block size aligned first): ``{pool_bytes_per_block, block_size, groups,
    sum_of_pages}``, ``sum_of_pages`` the attention layers' pages summed at the requested block size (the C++
    port's bytes per block; Mamba state is not paged there)."""
    pool = pool_of(layer_specs(config, tensor_parallel_size, block_size, kv_cache_dtype, dtype, align_hybrid=True))
    pool["sum_of_pages"] = attention_pages_summed(
        layer_specs(config, tensor_parallel_size, block_size, kv_cache_dtype, dtype))
    return pool


def attention_pages_summed(layers: Layers) -> int:
    """The sum of every attention layer's page (Mamba layers left out): the C++ port's bytes per block, on vLLM's
    own per-layer specs."""
    from vllm.v1.kv_cache_interface import AttentionSpec

    return int(sum(spec.page_size_bytes for spec in layers.specs.values() if isinstance(spec, AttentionSpec)))
