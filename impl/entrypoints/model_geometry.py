"""Per-rank KV geometry of a Hugging Face ``config.json``: the probe ``KVCacheConfig`` (MEM-2.10 to MEM-2.12).

Mirrors how vLLM reads a model's KV shape: vllm/config/model.py (``get_head_size``,
``get_num_kv_heads``, layer types), vllm/model_executor/layers/linear.py (KV-head replication) and
vllm/model_executor/layers/mamba/mamba_utils.py (gated delta-net state shapes).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from impl.entrypoints.config_file import MAX_LENGTH_KEYS, read_config_json
from impl.v1.dtypes import DType, dtype_like, dtype_name
from impl.v1.field_checks import check_int
from impl.v1.kv_cache_interface import (
    FP8_DS_MLA,
    AttentionSpec,
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheSpec,
    KVQuantMode,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
    kv_quant_mode_for,
)

if TYPE_CHECKING:  # torch-free at import: kv-plan passes PlainDType (impl/v1/dtypes.py), gates pass torch dtypes
    import torch

MODEL_DTYPE_NAMES = ("float16", "bfloat16", "float32")
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", FP8_DS_MLA,
                   "int8_per_token_head", "fp8_per_token_head", "nvfp4")
"""The --kv-cache-dtype values the port lays out; "float32" is not one (vLLM 0.33.0's KV_CACHE_DTYPES,
vllm/config/cache.py, refuses it: a float32 model's cache is "auto")."""
_ONE_BYTE_KV = {"int8_per_token_head": "int8"}
LAYER_TYPES = ("full_attention", "sliding_attention", "linear_attention")


def text_model_config(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A multimodal config's ``text_config`` (the top-level dtype kept), else the config itself."""
    text = raw.get("text_config")
    if isinstance(text, dict):
        merged = dict(text)
        for key in ("torch_dtype", "dtype"):
            if key not in merged and key in raw:
                merged[key] = raw[key]
        return merged
    return dict(raw)


def load_model_config(path: str | Path) -> dict[str, Any]:
    """Read a ``config.json`` with limits (impl/entrypoints/config_file.py); a multimodal config's ``text_config``
    is returned (top-level dtype kept)."""
    return text_model_config(read_config_json(path))


def _field(cfg: Mapping[str, Any], name: str, *, minimum: int = 1) -> int:
    if name not in cfg or cfg[name] is None:
        raise ValueError(f"config.json has no {name!r}, which KV sizing needs")
    return check_int("config.json", name, cfg[name], minimum=minimum)


def _divide(total: int, tp: int, what: str) -> int:
    if total % tp:
        raise ValueError(f"{what} ({total}) must be divisible by tensor parallel size ({tp})")
    return total // tp


def check_heads_divisible(cfg: Mapping[str, Any], tensor_parallel_size: int) -> None:
    """vLLM's ``ModelConfig.verify_with_parallel_config`` (vllm/config/model.py): every model, MLA included, refuses
    a tensor-parallel size that does not divide its total number of attention heads."""
    tp = check_int("probe", "tensor_parallel_size", tensor_parallel_size, minimum=1)
    heads = _field(cfg, "num_attention_heads")
    if heads % tp:
        raise ValueError(f"Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tp}); "
                         f"choose a --tensor-parallel-size that divides {heads}")


def is_mla(cfg: Mapping[str, Any]) -> bool:
    """DeepSeek-style latent attention: the config carries a ``kv_lora_rank``."""
    return cfg.get("kv_lora_rank") is not None


DEFAULT_HEAD_DIMS = {"gemma2": 256, "gemma3_text": 256, "qwen3_next": 256, "qwen3": 128}
"""``head_dim`` of a config.json that omits it, by model_type: the transformers config class's default, which
vLLM 0.33.0 reads (vllm/transformers_utils/model_arch_config_convertor.py ``get_head_size``); other types fall back
to hidden / heads (MEM-2.10). These classes type head_dim as an int: a ``head_dim: null`` is refused."""

ROTARY_FACTOR_DEFAULTS = {"qwen3_next": 0.25}
"""``partial_rotary_factor`` of a config.json that gives none, by model_type (Qwen3NextConfig's default); other
types rotate the whole head (1.0)."""
_SMALLEST_CHECKED_ROTARY = 5
"""transformers lets odd fully rotated widths up to 4 through (its tiny test checkpoints)."""


def _factor(value: Any, fallback: float) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else fallback


def rotary_factors(cfg: Mapping[str, Any]) -> tuple[float, ...]:
    """The ``partial_rotary_factor`` of each RoPE table (MEM-2.10): ``rope_parameters`` (or the older
    ``rope_scaling``; one table per layer type when nested), each defaulting to the top-level key, then to the
    type's default (``ROTARY_FACTOR_DEFAULTS``), then 1.0, as transformers' configs standardize them
    (transformers/modeling_rope_utils.py ``standardize_rope_params``); a value that is not a number is unset."""
    top = _factor(cfg.get("partial_rotary_factor"), ROTARY_FACTOR_DEFAULTS.get(cfg.get("model_type"), 1.0))
    rope = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), Mapping) else cfg.get("rope_scaling")
    if not isinstance(rope, Mapping):
        return (top,)
    nested = [table for table in rope.values() if isinstance(table, Mapping)]
    return tuple(_factor(table.get("partial_rotary_factor"), top) for table in (nested or [rope])) or (top,)


def check_rotary_width(cfg: Mapping[str, Any], width: int, what: str) -> int:
    """``width`` when RoPE can rotate it: an odd width above 4 that a table rotates whole is refused naming
    ``what`` and the value, as vLLM 0.33.0 refuses it while reading the config (transformers'
    ``validate_rope``, transformers/modeling_rope_utils.py; vllm/transformers_utils/config.py)."""
    if width < _SMALLEST_CHECKED_ROTARY or width % 2 == 0:
        return width
    for factor in rotary_factors(cfg):
        if int(width * factor) == width:
            raise ValueError(f"{what} ({width}) is odd, but RoPE rotates this head whole (partial_rotary_factor "
                             f"{factor}) and rotates pairs of dimensions: vLLM refuses an odd rotated width above 4")
    return width


def head_size(cfg: Mapping[str, Any]) -> int:
    """K/V head width: MLA's ``kv_lora_rank + qk_rope_head_dim``, else ``head_dim``, else the model type's default
    head_dim (``DEFAULT_HEAD_DIMS``), else hidden / heads. ``head_dim: 0`` is a head_dim left unset (vLLM's
    ``get_head_size``, vllm/transformers_utils/model_arch_config_convertor.py): hidden / heads, not the default;
    ``head_dim: null`` is hidden / heads too, and refused for a type with a default (its config class refuses it).
    The rotated width (MLA's ``qk_rope_head_dim``, else the head) is checked by ``check_rotary_width``."""
    if is_mla(cfg):
        rope = check_rotary_width(cfg, _field(cfg, "qk_rope_head_dim"), "qk_rope_head_dim")
        return _field(cfg, "kv_lora_rank") + rope
    if "head_dim" in cfg and cfg["head_dim"] is None and cfg.get("model_type") in DEFAULT_HEAD_DIMS:
        raise ValueError(f"config.json head_dim is null, but a {cfg['model_type']} config needs an int head_dim "
                         f"(omit it for the type's default, {DEFAULT_HEAD_DIMS[cfg['model_type']]})")
    unset = cfg.get("head_dim") is None or (type(cfg["head_dim"]) is int and cfg["head_dim"] == 0)
    if not unset:
        return check_rotary_width(cfg, _field(cfg, "head_dim"), "head_dim")
    if "head_dim" not in cfg and cfg.get("model_type") in DEFAULT_HEAD_DIMS:
        return DEFAULT_HEAD_DIMS[cfg["model_type"]]
    hidden, heads = _field(cfg, "hidden_size"), _field(cfg, "num_attention_heads")
    if hidden % heads:
        raise ValueError(f"hidden_size ({hidden}) is not a multiple of num_attention_heads ({heads})")
    return check_rotary_width(cfg, hidden // heads, "head_dim from hidden_size / num_attention_heads")


def kv_heads_per_rank(cfg: Mapping[str, Any], tensor_parallel_size: int) -> int:
    """KV heads one rank stores: total / tp, or 1 (replicated) when tp >= total; MLA keeps 1 latent head.
    A tp size that does not divide the attention heads is refused first, MLA included (as vLLM)."""
    tp = check_int("probe", "tensor_parallel_size", tensor_parallel_size, minimum=1)
    check_heads_divisible(cfg, tp)
    if is_mla(cfg):
        return 1
    heads = _field(cfg, "num_attention_heads")
    total_kv = _field(cfg, "num_key_value_heads") if cfg.get("num_key_value_heads") is not None else heads
    if heads % total_kv:
        raise ValueError(f"num_attention_heads ({heads}) must be a multiple of num_key_value_heads ({total_kv})")
    if tp >= total_kv:
        if tp % total_kv:
            raise ValueError(f"tensor parallel size ({tp}) must be a multiple of num_key_value_heads "
                                   f"({total_kv}) to replicate the KV heads")
        return 1
    return _divide(total_kv, tp, "num_key_value_heads")


def layer_types(cfg: Mapping[str, Any]) -> tuple[str, ...]:
    """One of ``full_attention``, ``sliding_attention``, ``linear_attention`` per decoder layer."""
    n = _field(cfg, "num_hidden_layers")
    if cfg.get("layer_types") is not None:
        types = cfg["layer_types"]
        if not isinstance(types, list) or len(types) != n or any(t not in LAYER_TYPES for t in types):
            raise ValueError(f"layer_types must list {n} entries from {list(LAYER_TYPES)}, got {types!r}")
        return tuple(types)
    model_type = cfg.get("model_type")
    if cfg.get("full_attention_interval") is not None:  # Qwen3-Next: every k-th layer is full attention
        k = _field(cfg, "full_attention_interval")
        return tuple("full_attention" if (i + 1) % k == 0 else "linear_attention" for i in range(n))
    if cfg.get("sliding_window") is None or cfg.get("use_sliding_window", True) is False:
        return ("full_attention",) * n
    if model_type == "gemma2":  # even layers slide, odd layers are global
        return tuple("sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n))
    if model_type in ("gemma3", "gemma3_text"):  # every k-th layer is global
        k = _field(cfg, "sliding_window_pattern")
        return tuple("full_attention" if (i + 1) % k == 0 else "sliding_attention" for i in range(n))
    # A window without layer_types (Llama, Mistral): vLLM 0.33.0's layers read per-layer windows from layer_types
    # only (vllm/model_executor/models/llama.py), so every layer is full attention (MEM-2.11).
    return ("full_attention",) * n


def model_dtype_name(cfg: Mapping[str, Any]) -> str:
    """The checkpoint dtype's name, from ``torch_dtype`` (or the newer ``dtype``)."""
    name = cfg.get("torch_dtype", cfg.get("dtype"))
    if name not in MODEL_DTYPE_NAMES:
        raise ValueError(f"config.json torch_dtype must be one of {list(MODEL_DTYPE_NAMES)}, got {name!r}")
    return name


FLOAT16_REFUSED = {"gemma2", "gemma3", "gemma3_text", "glm4"}
"""Model types vLLM 0.33.0 never runs in float16 (``_FLOAT16_NOT_SUPPORTED_MODELS``, vllm/config/model.py)."""
_FLOAT16_REASON = "Numerical instability. Please use bfloat16 or float32 instead."


def auto_run_dtype_name(cfg: Mapping[str, Any], checkpoint: str) -> str:
    """vLLM's ``--dtype auto`` for a checkpoint dtype (MEM-2.11): the checkpoint's, but a float16 checkpoint of a
    type in ``FLOAT16_REFUSED`` runs in bfloat16 (on a bf16-capable device; vllm/config/model.py
    ``_resolve_auto_dtype``)."""
    return "bfloat16" if checkpoint == "float16" and cfg.get("model_type") in FLOAT16_REFUSED else checkpoint


def run_dtype_name(cfg: Mapping[str, Any], requested: str | None = None) -> str:
    """The dtype the model runs in (MEM-2.11): ``requested`` is an explicit ``--dtype`` (float16 for a type in
    ``FLOAT16_REFUSED`` is refused with vLLM's message, ``_check_valid_dtype``, even on a float16 checkpoint);
    None is ``--dtype auto`` (``auto_run_dtype_name`` of the checkpoint's dtype)."""
    model_type = cfg.get("model_type")
    if requested is not None:
        if requested == "float16" and model_type in FLOAT16_REFUSED:
            raise ValueError(f"The model type {model_type!r} does not support float16. Reason: {_FLOAT16_REASON}")
        return requested
    return auto_run_dtype_name(cfg, model_dtype_name(cfg))


def model_dtype(cfg: Mapping[str, Any]) -> torch.dtype:
    """The dtype the checkpoint runs in (``run_dtype_name``), as a ``torch.dtype``."""
    return dtype_like(run_dtype_name(cfg), None)


LENGTH_ALREADY_SCALED = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
"""RoPE types whose config keeps max_position_embeddings already scaled: vLLM 0.33.0 applies no factor to the length
(vllm/config/model.py _get_and_verify_max_len; yarn's original_max_position_embeddings is not read there)."""


def derived_max_model_len(cfg: Mapping[str, Any]) -> tuple[str, float] | None:
    """vLLM's longest sequence for a config: the least of its length keys, model_max_length first, scaled by RoPE.

    Mirrors ``_get_and_verify_max_len`` (vllm/config/model.py): a ``rope_scaling`` whose type is not one of
    ``LENGTH_ALREADY_SCALED`` multiplies the length by its factor; Gemma-3 lengths are already scaled. None when the
    config has none of ``MAX_LENGTH_KEYS``.
    """
    found = [(key, cfg[key]) for key in MAX_LENGTH_KEYS if cfg.get(key) is not None]
    if not found:
        return None
    key, length = min(found, key=lambda pair: pair[1])  # the first key with the least length, as vLLM
    if cfg.get("model_max_length"):
        length, key = cfg["model_max_length"], "model_max_length"
    rope = cfg.get("rope_scaling")
    if isinstance(rope, Mapping) and "gemma3" not in str(cfg.get("model_type", "")):
        kind = rope.get("rope_type", rope.get("type"))
        if kind not in LENGTH_ALREADY_SCALED:
            length *= rope.get("factor", 1.0)
    return key, length


@dataclass(frozen=True)
class ProbeRequest:
    """What a probe is built for: ranks, dtypes and block size.

    ``dtype`` None takes the config's; a ``PlainDType`` makes every spec dtype a ``PlainDType`` (kv-plan's
    torch-free path), a ``torch.dtype`` or None makes them torch dtypes.
    """

    tensor_parallel_size: int = 1
    dtype: DType | None = None
    kv_cache_dtype: str = "auto"
    block_size: int = 32

    def __post_init__(self) -> None:
        check_int("ProbeRequest", "tensor_parallel_size", self.tensor_parallel_size, minimum=1)
        check_int("ProbeRequest", "block_size", self.block_size, minimum=1)
        if self.dtype is not None and dtype_name(self.dtype) not in MODEL_DTYPE_NAMES:
            raise ValueError(f"ProbeRequest.dtype must be one of {list(MODEL_DTYPE_NAMES)} or None, got {self.dtype}")
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise ValueError(f"ProbeRequest.kv_cache_dtype must be one of {list(KV_CACHE_DTYPES)}, "
                             f"got {self.kv_cache_dtype!r}")


def _kv_storage(request: ProbeRequest, model: DType) -> tuple[DType, KVQuantMode]:
    """The KV cache's element dtype (of the model dtype's kind) and quantization mode."""
    name = request.kv_cache_dtype
    if name == "auto":
        return model, KVQuantMode.NONE
    if name in MODEL_DTYPE_NAMES:
        if name != dtype_name(model):  # vllm/config/vllm.py _reject_mismatched_float_kv_cache (MEM-2.11)
            raise ValueError(f'kv_cache_dtype="{name}" is incompatible with dtype="{dtype_name(model)}": a float '
                             f"KV cache dtype must be the model dtype; set --kv-cache-dtype to auto")
        return dtype_like(name, model), KVQuantMode.NONE
    return dtype_like(_ONE_BYTE_KV.get(name, "uint8"), model), kv_quant_mode_for(name)


def _attention_spec(cfg: Mapping[str, Any], kind: str, request: ProbeRequest, model: DType) -> AttentionSpec:
    kv_dtype, mode = _kv_storage(request, model)
    common = dict(block_size=request.block_size, num_kv_heads=kv_heads_per_rank(cfg, request.tensor_parallel_size),
                  head_size=head_size(cfg), dtype=kv_dtype, kv_quant_mode=mode)
    if is_mla(cfg):
        if kind != "full_attention":
            raise ValueError(f"MLA with {kind} layers is not modelled")
        if mode is not KVQuantMode.NONE and mode is not KVQuantMode.FP8_PER_TENSOR:
            raise ValueError(f"kv_cache_dtype {request.kv_cache_dtype!r} is not supported with MLA")
        cache_str = request.kv_cache_dtype if request.kv_cache_dtype != "auto" else None
        return MLAAttentionSpec(**common, cache_dtype_str=cache_str)
    if request.kv_cache_dtype == FP8_DS_MLA:
        raise ValueError(f"kv_cache_dtype {FP8_DS_MLA!r} needs an MLA model (kv_lora_rank)")
    if kind == "sliding_attention":
        return SlidingWindowSpec(**common, sliding_window=_field(cfg, "sliding_window"))
    return FullAttentionSpec(**common)


def _gdn_spec(cfg: Mapping[str, Any], request: ProbeRequest, model: DType) -> MambaSpec:
    """Gated delta-net state of one rank: a causal-conv window and a per-head K x V recurrent state."""
    tp = request.tensor_parallel_size
    k_heads, v_heads = _field(cfg, "linear_num_key_heads"), _field(cfg, "linear_num_value_heads")
    k_dim, v_dim = _field(cfg, "linear_key_head_dim"), _field(cfg, "linear_value_head_dim")
    kernel = _field(cfg, "linear_conv_kernel_dim")
    conv_channels = _divide(2 * k_heads * k_dim + v_heads * v_dim, tp, "linear attention conv channels")
    shapes = ((kernel - 1, conv_channels), (_divide(v_heads, tp, "linear_num_value_heads"), k_dim, v_dim))
    return MambaSpec(block_size=request.block_size, shapes=shapes, dtypes=(model, model), mamba_type="gdn_attention")


def _run_dtype(cfg: Mapping[str, Any], requested: DType | None) -> DType:
    """``run_dtype_name`` as a dtype of the request's kind: a requested dtype is an explicit ``--dtype`` (kv-plan
    resolves ``auto`` with ``auto_run_dtype_name`` before it asks), None the checkpoint's under ``--dtype auto``."""
    if requested is None:
        return model_dtype(cfg)
    return dtype_like(run_dtype_name(cfg, dtype_name(requested)), requested)


def _layer_name(index: int, kind: str) -> str:
    return f"model.layers.{index}.linear_attn" if kind == "linear_attention" else f"model.layers.{index}.self_attn.attn"


def probe_kv_cache_config(cfg: Mapping[str, Any], request: ProbeRequest, num_blocks: int = 0) -> KVCacheConfig:
    """The KV layout one rank of this model needs, grouped by equal spec, with no tensors allocated."""
    if not isinstance(request, ProbeRequest):
        raise TypeError(f"probe_kv_cache_config needs a ProbeRequest, got {request!r}")
    model = _run_dtype(cfg, request.dtype)
    # Config-level refusals come before any layer, in vLLM's order (VllmConfig.__post_init__ rejects a mismatched
    # float KV cache dtype, then verify_with_parallel_config the heads), so a hybrid with no attention layer is
    # refused too.
    _kv_storage(request, model)
    check_heads_divisible(cfg, request.tensor_parallel_size)
    by_spec: dict[KVCacheSpec, list[str]] = {}
    specs: dict[str, KVCacheSpec] = {}
    for i, kind in enumerate(layer_types(cfg)):
        if kind not in specs:
            specs[kind] = _gdn_spec(cfg, request, model) if kind == "linear_attention" else \
                _attention_spec(cfg, kind, request, model)
        by_spec.setdefault(specs[kind], []).append(_layer_name(i, kind))
    groups = tuple(KVCacheGroupSpec(tuple(names), spec) for spec, names in by_spec.items())
    return KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=(), kv_cache_groups=groups)
