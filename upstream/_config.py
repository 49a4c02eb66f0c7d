"""Shared helpers of the upstream adapters: dtype names, and minimal real vLLM config objects on a CPU machine.

The configs are vLLM's own classes (vllm/config/vllm.py VllmConfig, vllm/config/model.py ModelConfig,
vllm/config/cache.py CacheConfig, vllm/config/parallel.py ParallelConfig; the SchedulerConfig is
VllmConfig's default), built from a synthetic Llama-shaped config.json written to a temporary folder (ModelConfig reads a
local folder; nothing is downloaded). What the adapters compare is then set on the built objects, as vLLM's own
estimate_max_model_len does with ``model_config.max_model_len``.
"""
from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from functools import lru_cache
from typing import Any

import torch

import upstream  # noqa: F401  (sets VLLM_TARGET_DEVICE and friends before vLLM is imported)

DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name)
    for name in ("float32", "float16", "bfloat16", "uint8", "int8", "float8_e4m3fn", "float8_e5m2")
}


def dtype(name: str) -> torch.dtype:
    """torch's dtype for a name the gate cases use (``bfloat16``); KeyError names an unknown one."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype name {name!r}; known: {sorted(DTYPES)}") from None


_SYNTHETIC_MODEL = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "num_hidden_layers": 2,
    "vocab_size": 1024,
    "max_position_embeddings": 1 << 30,
    "torch_dtype": "float16",
    "rms_norm_eps": 1e-5,
}


@lru_cache(maxsize=None)
def model_folder(config_json: str | None = None) -> str:
    """A temporary folder holding ``config.json`` (the synthetic model unless given), removed at exit."""
    folder = tempfile.mkdtemp(prefix="vllm-gates-upstream-")
    atexit.register(shutil.rmtree, folder, True)
    with open(f"{folder}/config.json", "w", encoding="utf-8") as handle:
        handle.write(config_json if config_json is not None else json.dumps(_SYNTHETIC_MODEL))
    return folder


def vllm_config(
    *,
    max_model_len: int = 4096,
    block_size: int = 16,
    max_num_batched_tokens: int | None = None,
    mamba_cache_mode: str = "none",
    decode_context_parallel_size: int = 1,
    tensor_parallel_size: int | None = None,
    max_num_encoder_input_tokens: int | None = None,
    model_config_json: str | None = None,
    **cache_fields: Any,
) -> Any:
    """A real ``vllm.config.VllmConfig`` for the KV-cache functions (vllm/config/vllm.py).

    ``max_num_batched_tokens=None`` takes ``max_model_len`` (what the port's max-usage functions assume).
    ``mamba_cache_mode`` goes through ``CacheConfig`` validation, so a mode vLLM does not know is vLLM's refusal.
    """
    from vllm.config import CacheConfig, ModelConfig, ParallelConfig, VllmConfig

    model_config = ModelConfig(model=model_folder(model_config_json), skip_tokenizer_init=True, dtype="auto")
    cache_config = CacheConfig(block_size=block_size, mamba_cache_mode=mamba_cache_mode, **cache_fields)
    tp = decode_context_parallel_size if tensor_parallel_size is None else tensor_parallel_size
    parallel_config = ParallelConfig(tensor_parallel_size=tp, decode_context_parallel_size=decode_context_parallel_size)
    batched = max_model_len if max_num_batched_tokens is None else max_num_batched_tokens
    config = VllmConfig(model_config=model_config, cache_config=cache_config, parallel_config=parallel_config)
    # vLLM's platform hooks (the CPU platform here) may adjust these at construction; set what is compared.
    config.model_config.max_model_len = max_model_len
    config.cache_config.block_size = block_size
    config.scheduler_config.max_num_batched_tokens = batched
    if max_num_encoder_input_tokens is not None:
        config.scheduler_config.max_num_encoder_input_tokens = max_num_encoder_input_tokens
    return config
