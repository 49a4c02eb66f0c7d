"""Generated model-bytes-per-block inputs for the upstream geometry gates (gate.yaml, upstream: model geometry and
hybrid pools; upstream/gates_geometry.py), split by which vLLM 0.33.0 behaviour judges them.

- ``one_group_model_inputs``: models vLLM keeps in one KV cache group with even KV-head shards (dense, MLA, one
  layer kind throughout), at many TP sizes, TP sizes that do not divide the heads included (both refuse);
- ``hybrid_model_inputs``: sliding-window + full and GDN hybrids (``hybrid-summed-bytes-per-block``);
- ``uneven_kv_shard_inputs``: TP sizes that divide the attention heads but not the KV heads, or that the KV heads
  do not divide (``model-uneven-kv-shards-refused``);
- ``hidden_heads_inputs``: Llama and Mistral configs whose hidden_size the heads do not divide, with or without
  head_dim (``model-head-size-needs-whole-heads``);
- ``negative_head_dim_inputs``: a negative head_dim (``model-negative-head-dim-refused``).

One-group inputs include odd rotated widths (``_odd_rotary``), refused or accepted by both as transformers' RoPE
check decides.

A family's layer kinds are those transformers' configs default to (Gemma-2 alternates from a sliding layer 0,
Gemma-3 makes every k-th layer full, Qwen3-Next every k-th layer full attention among linear ones).
"""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

TP_SIZES = [1, 2, 3, 4, 6, 8, 16, 32]
_MODEL_DTYPES = ["bfloat16", "float16", "float32"]
_FULL_CACHE = ["auto", "bfloat16", "float16", "fp8", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head", "nvfp4"]
_SLIDING_CACHE = ["auto", "fp8", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head"]
_GEMMA_DTYPES = ["bfloat16", "float16", "float32"]
"""vLLM refuses float16 for Gemma-2/3 (numerical instability) and runs a float16 checkpoint in bfloat16, as the
port does (MEM-2.11)."""
_MLA_CACHE = ["auto", "bfloat16", "fp8", "fp8_ds_mla"]


def kv_shards_evenly(heads: int, kv_heads: int, tp: int) -> bool:
    """QKVParallelLinear's condition (vllm/model_executor/layers/linear.py), once tp divides the heads."""
    if heads % tp:
        return True  # refused before any sharding, by both
    return tp % kv_heads == 0 if tp >= kv_heads else kv_heads % tp == 0


def _attention(draw: st.DrawFn, kv_choices: list[int], multipliers: list[int]) -> dict[str, Any]:
    kv_heads = draw(st.sampled_from(kv_choices))
    heads = kv_heads * draw(st.sampled_from(multipliers))
    cfg: dict[str, Any] = {"num_attention_heads": heads, "num_key_value_heads": kv_heads,
                           "hidden_size": heads * draw(st.sampled_from([32, 64, 128])),
                           "torch_dtype": draw(st.sampled_from(_MODEL_DTYPES))}
    if draw(st.booleans()):
        cfg["head_dim"] = draw(st.sampled_from([0, 64, 80, 128, 256]))  # 0: unset, hidden / heads
    return cfg


def _case(draw: st.DrawFn, cfg: dict[str, Any], cache: list[str], tp: int | None = None) -> dict[str, Any]:
    return {"config": cfg, "tensor_parallel_size": tp if tp is not None else draw(st.sampled_from(TP_SIZES)),
            "block_size": draw(st.sampled_from([1, 16, 32])), "kv_cache_dtype": draw(st.sampled_from(cache))}


def _odd_rotary(draw: st.DrawFn, cfg: dict[str, Any]) -> None:
    """An odd rotated width (MEM-2.10): transformers' RoPE check refuses one above 4 that a table rotates whole,
    which vLLM 0.33.0 reads configs through; up to 4, or partly rotated (partial_rotary_factor, Qwen3-Next's default
    0.25), it is accepted."""
    if cfg.get("kv_lora_rank") is not None:
        cfg["qk_rope_head_dim"] = draw(st.sampled_from([63, 65]))
    else:
        cfg["head_dim"] = draw(st.sampled_from([3, 125, 127]))
    placement = draw(st.sampled_from(["none", "none", "top", "rope_parameters", "rope_scaling"]))
    factor = draw(st.sampled_from([0.5, 1.0]))
    if placement == "top":
        cfg["partial_rotary_factor"] = factor
    elif placement != "none":
        cfg[placement] = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": factor}


@st.composite
def one_group_model_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """Dense, MLA, all-sliding and all-full configs of several families, KV heads that shard evenly."""
    family = draw(st.sampled_from(["dense", "dense", "mla", "layer_types", "gemma2_one", "gemma3_full",
                                   "qwen3_next_full", "bare_window"]))
    cfg = _attention(draw, [1, 2, 4, 8, 16], [1, 2, 3, 4])
    cfg.update(model_type="llama", num_hidden_layers=draw(st.integers(1, 8)))
    cache = _FULL_CACHE
    if family == "mla":
        cfg.update(model_type="deepseek_v2", kv_lora_rank=draw(st.sampled_from([512, 256])),
                   qk_rope_head_dim=draw(st.sampled_from([64, 32])), qk_nope_head_dim=128, v_head_dim=128,
                   torch_dtype=draw(st.sampled_from(["bfloat16", "float16"])))
        cfg.pop("head_dim", None)
        cache = _MLA_CACHE
    elif family == "layer_types":
        kind = draw(st.sampled_from(["full_attention", "sliding_attention"]))
        cfg.update(sliding_window=1024, layer_types=[kind] * cfg["num_hidden_layers"])
        cache = _FULL_CACHE if kind == "full_attention" else _SLIDING_CACHE
    elif family == "bare_window":  # a window without layer_types: every layer full attention
        cfg.update(model_type=draw(st.sampled_from(["llama", "mistral"])),
                   sliding_window=draw(st.sampled_from([512, 4096])))
    elif family == "gemma2_one":
        cfg.update(model_type="gemma2", num_hidden_layers=1, sliding_window=draw(st.sampled_from([512, 4096])),
                   torch_dtype=draw(st.sampled_from(_GEMMA_DTYPES)))
        cache = _SLIDING_CACHE
    elif family == "gemma3_full":
        cfg.update(model_type="gemma3_text", sliding_window=512, sliding_window_pattern=1,
                   torch_dtype=draw(st.sampled_from(_GEMMA_DTYPES)))
    elif family == "qwen3_next_full":
        cfg.update(model_type="qwen3_next", full_attention_interval=1, linear_num_key_heads=2,
                   linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32,
                   linear_conv_kernel_dim=4)
    if family in ("dense", "mla", "gemma2_one", "qwen3_next_full") and draw(st.integers(0, 3)) == 0:
        _odd_rotary(draw, cfg)
    case = _case(draw, cfg, cache)
    width = cfg.get("head_dim") or 0
    if case["kv_cache_dtype"] == "nvfp4" and width % 2:  # an accepted odd width: kv-spec-nvfp4-width-multiple-of-16
        case["kv_cache_dtype"] = "auto"
    if case["kv_cache_dtype"] == "fp8_ds_mla":  # FlashMLA's 576-wide latent only (kv-spec-fp8-ds-mla-fields)
        cfg.update(kv_lora_rank=512, qk_rope_head_dim=64)
    if family != "mla" and not kv_shards_evenly(cfg["num_attention_heads"], cfg["num_key_value_heads"],
                                                case["tensor_parallel_size"]):
        case["tensor_parallel_size"] = 1
    return case


@st.composite
def hybrid_model_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """Gemma-2 (two or more layers), Gemma-3 (a window pattern of 2 to 6), mixed layer_types and Qwen3-Next GDN
    hybrids, at TP sizes that divide the heads and shard the KV heads (and the GDN heads) evenly."""
    family = draw(st.sampled_from(["gemma2", "gemma3", "layer_types", "gdn"]))
    cfg = _attention(draw, [1, 2, 4, 8], [1, 2, 4])
    cfg["num_hidden_layers"] = draw(st.integers(2, 12))
    cache = _SLIDING_CACHE
    if family == "gemma2":
        cfg.update(model_type="gemma2", sliding_window=draw(st.sampled_from([512, 4096])),
                   torch_dtype=draw(st.sampled_from(_GEMMA_DTYPES)))
    elif family == "gemma3":
        pattern = draw(st.integers(2, 6))
        cfg.update(model_type="gemma3_text", sliding_window=draw(st.sampled_from([512, 1024])),
                   torch_dtype=draw(st.sampled_from(_GEMMA_DTYPES)),
                   sliding_window_pattern=pattern, num_hidden_layers=draw(st.integers(pattern, 12)))
    elif family == "layer_types":
        n = cfg["num_hidden_layers"]
        kinds = draw(st.lists(st.sampled_from(["full_attention", "sliding_attention"]), min_size=n, max_size=n))
        full, sliding = draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True))
        kinds[full], kinds[sliding] = "full_attention", "sliding_attention"
        cfg.update(model_type="llama", sliding_window=1024, layer_types=kinds)
    else:
        interval = draw(st.integers(2, 4))
        cfg.update(model_type="qwen3_next", full_attention_interval=interval,
                   num_hidden_layers=interval * draw(st.integers(1, 3)),
                   linear_num_key_heads=draw(st.sampled_from([2, 4])),
                   linear_num_value_heads=draw(st.sampled_from([4, 8])), linear_key_head_dim=32,
                   linear_value_head_dim=32, linear_conv_kernel_dim=4)
        cache = ["auto", "bfloat16", "fp8"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    limit = min(heads, cfg.get("linear_num_key_heads", heads))
    sizes = [tp for tp in TP_SIZES if heads % tp == 0 and tp <= limit and kv_shards_evenly(heads, kv_heads, tp)]
    return _case(draw, cfg, cache, tp=draw(st.sampled_from(sizes)))


@st.composite
def uneven_kv_shard_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """Dense configs whose KV heads a TP size dividing the attention heads cannot split or replicate evenly, and
    (one in three) the same configs at a TP size that shards them evenly, the deviation's boundary."""
    kv_heads = draw(st.sampled_from([3, 6, 8, 12]))
    heads = kv_heads * draw(st.sampled_from([2, 4, 8]))
    even = draw(st.integers(0, 2)) == 0
    sizes = [tp for tp in range(1, heads + 1)
             if heads % tp == 0 and kv_shards_evenly(heads, kv_heads, tp) == even]
    if not sizes:
        kv_heads, heads, sizes = 6, 24, [4]
    cfg = {"model_type": "llama", "num_hidden_layers": draw(st.integers(1, 4)), "num_attention_heads": heads,
           "num_key_value_heads": kv_heads, "hidden_size": heads * 64, "torch_dtype": "bfloat16"}
    return _case(draw, cfg, ["auto", "fp8"], tp=draw(st.sampled_from(sizes)))


@st.composite
def hidden_heads_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """Llama and Mistral configs with a hidden_size a few units off a multiple of the heads, head_dim given (and
    even, as RoPE needs) in half of them."""
    kv_heads = draw(st.sampled_from([1, 2, 4]))
    heads = kv_heads * draw(st.sampled_from([2, 4]))
    cfg: dict[str, Any] = {"model_type": draw(st.sampled_from(["llama", "mistral"])),
                           "num_hidden_layers": draw(st.integers(1, 4)), "num_attention_heads": heads,
                           "num_key_value_heads": kv_heads, "torch_dtype": "bfloat16",
                           "hidden_size": heads * 128 + draw(st.integers(1, heads - 1))}
    if draw(st.booleans()):  # hidden // heads is 128 either way: an even width, as transformers' RoPE check needs
        cfg["head_dim"] = draw(st.sampled_from([64, 128]))
    return _case(draw, cfg, ["auto", "fp8"], tp=draw(st.sampled_from([tp for tp in (1, 2) if heads % tp == 0])))


@st.composite
def negative_head_dim_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """Llama, Mistral and one-layer Gemma-2 configs with a negative head_dim (``model-negative-head-dim-refused``),
    hidden_size an even multiple of the heads; one in five at head_dim 0, the boundary both read as unset."""
    cfg = _attention(draw, [1, 2, 4], [1, 2])
    cfg.update(model_type=draw(st.sampled_from(["llama", "mistral", "gemma2"])),
               num_hidden_layers=draw(st.integers(1, 3)), head_dim=draw(st.sampled_from([-1, -64, -128, -257, 0])))
    if cfg["model_type"] == "gemma2":
        cfg.update(num_hidden_layers=1, sliding_window=512, torch_dtype="bfloat16")
    heads = cfg["num_attention_heads"]
    return _case(draw, cfg, ["auto", "fp8"], tp=draw(st.sampled_from([tp for tp in (1, 2) if heads % tp == 0])))
