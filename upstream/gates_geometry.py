"""vLLM 0.33.0 as the oracle of ROAD-V1-MEM's model-bytes-per-block (MEM-2.10, MEM-2.11), in the operation's shape.

- ``model_bytes_per_block``: the agreeing gate ``model-geometry:upstream``. vLLM's per-layer specs of the model at
  the TP size (upstream/model_geometry.py ``layer_specs``: ModelConfig's getters, vllm/config/model.py) and one
  block of vLLM's pool by vLLM's own grouping (vllm/v1/core/kv_cache_planning.py ``_pool_bytes_per_block``); vLLM's
  refusal of the TP size (``verify_with_parallel_config``) as a ``ValueError`` with its message. Only models vLLM
  puts in one KV cache group with even KV-head shards are this gate's: the others are declared deviations, and
  reaching one here is an ``AssertionError`` naming it.
- ``model_kv_layers``: the agreeing gate ``model-kv-layers:upstream``, each layer's name and spec class.
- ``hybrid_bytes_as_declared``: the checking view of ``hybrid-summed-bytes-per-block`` (spec/deviations.yaml).
- ``uneven_kv_shards_as_declared``: the checking view of ``model-uneven-kv-shards-refused``.
- ``float32_checkpoint_as_declared``: the checking view of ``model-dtype-is-checkpoint``.
- ``hidden_heads_as_declared``: the checking view of ``model-head-size-needs-whole-heads``.
- ``negative_head_dim_as_declared``: the checking view of ``model-negative-head-dim-refused``.

transformers' refusals of a config field while vLLM reads it (an odd head width RoPE would rotate whole, a null
``head_dim`` where the config class types it int) are not ValueErrors; ``_layers`` reports them as one, as the port
refuses them.

Each checking view first asserts vLLM still behaves as the deviation declares (``AssertionError`` naming it if
not, which no implementation's answer agrees with), then answers with what we declare, derived from vLLM's own
figures. vLLM is imported on the first call, not on import (see upstream/gates_mem.py).
"""
from __future__ import annotations

from typing import Any, Mapping

import upstream  # noqa: F401  (environment before vLLM's import)

HYBRID = "hybrid-summed-bytes-per-block"
UNEVEN = "model-uneven-kv-shards-refused"
CHECKPOINT_DTYPE = "model-dtype-is-checkpoint"
WHOLE_HEADS = "model-head-size-needs-whole-heads"
_NOT_MULTIPLE = "is not a multiple of the number of attention heads"
"""transformers' ``PreTrainedConfig.validate_architecture`` text (transformers/configuration_utils.py), which the
Llama, Gemma-2 and DeepSeek-V2 config classes raise while vLLM reads the config."""


def _stale(deviation: str, what: str) -> AssertionError:
    return AssertionError(f"spec/deviations.yaml {deviation} no longer holds at vLLM {upstream.installed_version()}: {what}")


def _layers(config: Mapping[str, Any], tensor_parallel_size: int, block_size: int, kv_cache_dtype: str,
            align_hybrid: bool = False, dtype: str = "checkpoint") -> Any:
    """upstream.model_geometry.layer_specs; vLLM's refusal of the config as a plain ValueError with its message."""
    from upstream import model_geometry

    try:
        return model_geometry.layer_specs(config, tensor_parallel_size, block_size, kv_cache_dtype, dtype,
                                          align_hybrid=align_hybrid)
    except ValueError as exc:
        raise ValueError(f"vLLM 0.33.0 refuses the model at tensor parallel size {tensor_parallel_size}: "
                         f"{model_geometry.message_of(exc)}") from None
    except Exception as exc:  # noqa: BLE001  (transformers' config validation: not a ValueError)
        refused = model_geometry.config_refusal(exc)
        if refused is None:
            raise
        raise ValueError(f"vLLM 0.33.0 refuses the config.json while transformers reads it: {refused}") from None


def _uneven_kv(layers: Any) -> tuple[int, int] | None:
    """(total KV heads, tp) when QKVParallelLinear (vllm/model_executor/layers/linear.py) cannot shard the KV heads
    evenly (``divide(total, tp)`` below tp, ``divide(tp, total)`` at or above it), else None; MLA keeps one head."""
    model, parallel = layers.vllm_config.model_config, layers.vllm_config.parallel_config
    if model.use_mla:
        return None
    total, tp = int(model.get_total_num_kv_heads()), int(parallel.tensor_parallel_size)
    uneven = (tp % total) if tp >= total else (total % tp)
    return (total, tp) if uneven else None


def _is_hybrid(pool: Mapping[str, Any]) -> bool:
    return len(pool["groups"]) > 1 or any(g["kind"] == "MambaSpec" for g in pool["groups"])


def model_bytes_per_block(config: Mapping[str, Any], tensor_parallel_size: int = 1, block_size: int = 16,
                          kv_cache_dtype: str = "auto") -> int:
    """One block of vLLM's KV pool for one rank of a one-group model: the sum of its layers' pages, as vLLM's
    ``_pool_bytes_per_block`` computes it (the model dtype is the checkpoint's: ``model-dtype-is-checkpoint``)."""
    from upstream import model_geometry

    layers = _layers(config, tensor_parallel_size, block_size, kv_cache_dtype)
    if _uneven_kv(layers) is not None:
        raise AssertionError(f"uneven KV-head shards {_uneven_kv(layers)}: the deviation {UNEVEN} "
                             f"(model-geometry:uneven-kv-shards), not this gate's")
    pool = model_geometry.pool_of(layers)
    if _is_hybrid(pool):
        raise AssertionError(f"vLLM groups this model in {len(pool['groups'])} KV cache groups: the deviation "
                             f"{HYBRID} (model-geometry:hybrid-pool), not this gate's")
    return int(pool["pool_bytes_per_block"])


def model_kv_layers(config: Mapping[str, Any], tensor_parallel_size: int = 1, block_size: int = 16,
                    kv_cache_dtype: str = "auto") -> dict[str, str]:
    """The agreeing gate ``model-kv-layers:upstream``: each KV layer of one rank by name (the decoder layer's module
    path as vLLM's model files prefix it) with the class of the spec vLLM's layer builds for it, the layer's kind
    being the config's ``layer_types`` as transformers fills it (upstream/model_geometry.py ``layer_specs``)."""
    return {name: type(spec).__name__
            for name, spec in _layers(config, tensor_parallel_size, block_size, kv_cache_dtype).specs.items()}


def hybrid_bytes_as_declared(config: Mapping[str, Any], tensor_parallel_size: int = 1, block_size: int = 16,
                             kv_cache_dtype: str = "auto") -> int:
    """``hybrid-summed-bytes-per-block``: asserts vLLM's pool is as declared, then the sum of vLLM's own attention
    layers' pages at the requested block size (Mamba layers left out), the figure we declare.

    Declared of vLLM 0.33.0 (vllm/v1/core/kv_cache_planning.py, vllm/platforms/interface.py): the layers fall in
    more than one KV cache group, or some are Mamba layers; one pool block costs the largest group's summed pages
    (``_get_kv_cache_bytes_per_block``: ``max`` over groups of the sum over the group's layers, the layers'
    block-stride alignments dividing it); with Mamba layers the platform first raises the block size until one
    attention page holds a Mamba state and pads every Mamba page to that page (``_align_hybrid_block_size``), so
    every group's layers have the one page."""
    from upstream import model_geometry

    aligned = _layers(config, tensor_parallel_size, block_size, kv_cache_dtype, align_hybrid=True)
    pool = model_geometry.pool_of(aligned)
    if not _is_hybrid(pool):
        raise AssertionError(f"hybrid_bytes_as_declared: vLLM puts this model in one group with no Mamba layer; "
                             f"not a {HYBRID} case")
    widest = max(group["bytes"] for group in pool["groups"])
    if pool["pool_bytes_per_block"] != widest:
        raise _stale(HYBRID, f"one pool block was declared to cost the largest group's pages ({widest} bytes), "
                             f"but _pool_bytes_per_block gave {pool['pool_bytes_per_block']} "
                             f"(groups {pool['groups']})")
    if any(group["kind"] == "MambaSpec" for group in pool["groups"]):
        pages = {group["page_size_bytes"] for group in pool["groups"]}
        if len(pages) != 1 or pool["block_size"] < block_size:
            raise _stale(HYBRID, f"with Mamba layers every group was declared to share one page at a block size "
                                 f">= {block_size}, got block size {pool['block_size']} and groups {pool['groups']}")
    summed = model_geometry.attention_pages_summed(
        _layers(config, tensor_parallel_size, block_size, kv_cache_dtype))
    return summed


def uneven_kv_shards_as_declared(config: Mapping[str, Any], tensor_parallel_size: int = 1, block_size: int = 16,
                                 kv_cache_dtype: str = "auto") -> int:
    """``model-uneven-kv-shards-refused``: asserts ModelConfig accepts the TP size and gives
    ``max(1, total_kv // tp)`` KV heads per rank, while the QKV projection's ``divide``
    (vllm/distributed/utils.py, called by QKVParallelLinear in vllm/model_executor/layers/linear.py) refuses the
    pair; then the refusal we declare (``ValueError`` naming both numbers). Where the KV heads shard evenly, the
    deviation's boundary, vLLM's own figure (:func:`model_bytes_per_block`)."""
    from vllm.distributed.utils import divide

    layers = _layers(config, tensor_parallel_size, block_size, kv_cache_dtype)
    pair = _uneven_kv(layers)
    if pair is None:
        return model_bytes_per_block(config, tensor_parallel_size, block_size, kv_cache_dtype)
    total, tp = pair
    model, parallel = layers.vllm_config.model_config, layers.vllm_config.parallel_config
    per_rank = int(model.get_num_kv_heads(parallel))
    if per_rank != max(1, total // tp):
        raise _stale(UNEVEN, f"get_num_kv_heads was declared to floor {total} KV heads over tp {tp} to "
                             f"{max(1, total // tp)}, got {per_rank}")
    try:
        divide(tp, total) if tp >= total else divide(total, tp)
    except AssertionError:
        pass
    else:
        raise _stale(UNEVEN, f"QKVParallelLinear's divide was declared to refuse {total} KV heads over tp {tp}")
    raise ValueError(f"num_key_value_heads ({total}) and tensor parallel size ({tp}) do not shard evenly "
                     f"(declared: vLLM's model build refuses them)")


def float32_checkpoint_as_declared(config: Mapping[str, Any], tensor_parallel_size: int = 1, block_size: int = 16,
                                   kv_cache_dtype: str = "auto") -> int:
    """``model-dtype-is-checkpoint``: asserts ``--dtype auto`` downcasts a float32 checkpoint
    (vllm/config/model.py ``_resolve_auto_dtype``), so vLLM's default KV pages are half-width; then vLLM's pool
    block at ``--dtype float32``, the checkpoint's dtype we size with."""
    from upstream import model_geometry

    if str(config.get("torch_dtype", config.get("dtype"))) != "float32":
        raise AssertionError(f"float32_checkpoint_as_declared: not a float32 checkpoint; not a {CHECKPOINT_DTYPE} case")
    auto = model_geometry.geometry(config, tensor_parallel_size, block_size, kv_cache_dtype, dtype="auto")["dtype"]
    if auto == "float32":
        raise _stale(CHECKPOINT_DTYPE, "--dtype auto was declared to downcast a float32 checkpoint, but kept float32")
    return model_bytes_per_block(config, tensor_parallel_size, block_size, kv_cache_dtype)


def hidden_heads_as_declared(config: Mapping[str, Any], tensor_parallel_size: int = 1, block_size: int = 16,
                             kv_cache_dtype: str = "auto") -> int:
    """``model-head-size-needs-whole-heads``: a config whose hidden_size the attention heads do not divide.

    Asserts vLLM 0.33.0 either refuses it while reading the config (transformers' ``validate_architecture`` for
    Llama / Gemma-2 / DeepSeek-V2, whether or not head_dim is given) or, for a config class without that check
    (Mistral), reads head_dim when given and else floors hidden / heads (``get_head_size``,
    vllm/transformers_utils/model_arch_config_convertor.py). Then what we declare: without head_dim a ValueError
    naming both numbers; with head_dim, vLLM's pool block for the config with hidden_size = heads * head_dim (a
    width the KV cache does not read)."""
    from upstream import model_geometry

    heads, hidden = int(config["num_attention_heads"]), int(config["hidden_size"])
    if hidden % heads == 0:
        raise AssertionError(f"hidden_heads_as_declared: {heads} heads divide hidden_size {hidden}; not a "
                             f"{WHOLE_HEADS} case")
    head_dim = config.get("head_dim") or None
    try:
        vllm_head = model_geometry.geometry(config, tensor_parallel_size, block_size, kv_cache_dtype,
                                            dtype="auto")["head_size"]
    except Exception as exc:  # noqa: BLE001  (transformers' StrictDataclassClassValidationError is no ValueError)
        message = model_geometry.message_of(exc) if isinstance(exc, ValueError) else str(exc)
        if _NOT_MULTIPLE not in message:
            raise _stale(WHOLE_HEADS, f"vLLM was declared to refuse hidden_size {hidden} over {heads} heads "
                                      f"while reading the config, or to accept it; it refused with {message!r}")
    else:
        expected = head_dim if head_dim is not None else hidden // heads
        if vllm_head != expected:
            raise _stale(WHOLE_HEADS, f"vLLM was declared to read a head size of {expected} "
                                      f"(head_dim, else hidden // heads), got {vllm_head}")
    if head_dim is None:
        raise ValueError(f"hidden_size ({hidden}) is not a multiple of num_attention_heads ({heads}) "
                         f"(declared: no head_dim to size the heads with)")
    return model_bytes_per_block({**config, "hidden_size": heads * int(head_dim)}, tensor_parallel_size,
                                 block_size, kv_cache_dtype)


NEGATIVE_HEAD_DIM = "model-negative-head-dim-refused"


def negative_head_dim_as_declared(config: Mapping[str, Any], tensor_parallel_size: int = 1, block_size: int = 16,
                                  kv_cache_dtype: str = "auto") -> int:
    """``model-negative-head-dim-refused``: asserts vLLM 0.33.0 still reads a negative ``head_dim`` as unset, a head
    size of hidden // heads (``get_head_size``, vllm/transformers_utils/model_arch_config_convertor.py, takes only a
    positive head_dim), whatever the type's default; then the refusal we declare (``ValueError`` naming the field).
    ``head_dim: 0``, the boundary, is unset in both: vLLM's own pool block (:func:`model_bytes_per_block`)."""
    from upstream import model_geometry

    head_dim = config.get("head_dim")
    if head_dim == 0 and type(head_dim) is int:  # the boundary, unset in both: vLLM's own pool block
        return model_bytes_per_block(config, tensor_parallel_size, block_size, kv_cache_dtype)
    if type(head_dim) is not int or head_dim >= 0:
        raise AssertionError(f"negative_head_dim_as_declared: head_dim {head_dim!r} is not negative; not a "
                             f"{NEGATIVE_HEAD_DIM} case")
    expected = int(config["hidden_size"]) // int(config["num_attention_heads"])
    try:
        got: object = model_geometry.geometry(config, tensor_parallel_size, block_size, kv_cache_dtype,
                                              dtype="auto")["head_size"]
    except Exception as exc:  # noqa: BLE001  (a refusal, of any class, is what the declaration says vLLM lacks)
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        raise _stale(NEGATIVE_HEAD_DIM, f"vLLM was declared to read head_dim {head_dim} as unset, a head size of "
                                        f"hidden_size // num_attention_heads = {expected}, but gave {got!r}")
    raise ValueError(f"config.json head_dim {head_dim} is negative (declared: refused, where vLLM reads it as unset)")
