"""The upstream oracle tier: vLLM itself (the pinned release) as an oracle, behind plain-data adapters.

This package is the only place in the repository allowed to import ``vllm``; ``impl`` and ``oracles`` must never
import it (nor this package). Each adapter module is a set of plain functions: plain data in (the shapes the rows'
gate cases use), plain data out (ints, floats, strings, lists, dicts), computed by vLLM's own code.

- ``upstream.kv_specs``  page sizes and max memory usage of every KV spec kind (vllm/v1/kv_cache_interface.py)
- ``upstream.kv_quant``  the KVQuantMode enum and the kv-cache-dtype string -> mode map
- ``upstream.kv_fit``    estimate_max_model_len / check_enough_kv_cache_memory (vllm/v1/core/kv_cache_planning.py)
- ``upstream.sizes``     human_readable_int, vLLM's CLI size parser (vllm/utils/argparse_utils.py)
- ``upstream.parallel``  initialize_model_parallel's group tables with torch.distributed faked, ParallelConfig's
  size validation (vllm/distributed/parallel_state.py, vllm/config/parallel.py)
- ``upstream.shard_plan``  the TP-W2 shard plan read off vLLM's own linear and vocab-parallel layers, loaded per rank
  with the TP group faked (vllm/model_executor/layers/linear.py, vllm/model_executor/layers/vocab_parallel_embedding.py)
- ``upstream.norm_rope``  RMSNorm.forward_native and RotaryEmbedding.forward_native on CPU
  (vllm/model_executor/layers/layernorm.py, vllm/model_executor/layers/rotary_embedding/base.py)
- ``upstream.memory``    MemorySnapshot / memory_profiling with the device readings faked (vllm/utils/mem_utils.py)
- ``upstream.model_geometry``  ModelConfig's per-rank geometry of a config.json at a TP size, vLLM's refusals, and
  the pool bytes per block by vLLM's grouping (vllm/config/model.py, vllm/v1/core/kv_cache_planning.py)
- ``upstream.hf_qwen3``  not vLLM: HF transformers' own Qwen3ForCausalLM answering decoder-taps (the optional `hf`
  extra pins transformers 5.25.x; it imports transformers only when called)

Install the pin with ``bash ci/install-upstream.sh`` (see there why it is a script and not a pip extra).
Importing this package never imports vLLM; the adapter modules do, on import.
"""
from __future__ import annotations

import importlib
import os

PINNED_VERSION = "0.33.0"
"""The vLLM release the project mirrors and the upstream gates compare against."""

MODULES: tuple[str, ...] = (
    "vllm.v1.kv_cache_interface",
    "vllm.v1.core.kv_cache_utils",
    "vllm.v1.core.kv_cache_planning",
    "vllm.v1.attention.backends.triton_attn",
    "vllm.v1.attention.backends.utils",
    "vllm.v1.attention.backends.registry",
    "vllm.v1.worker.utils",
    "vllm.model_executor.layers.attention.mla_attention",
    "vllm.utils.argparse_utils",
    "vllm.utils.mem_utils",
    "vllm.utils.torch_utils",
    "vllm.distributed.parallel_state",
    "vllm.model_executor.layers.linear",
    "vllm.model_executor.layers.vocab_parallel_embedding",
    "vllm.model_executor.layers.layernorm",
    "vllm.model_executor.layers.rotary_embedding.base",
    "vllm.config",
    "compressed_tensors",
)
"""Every vLLM module the adapters import (ci/install-upstream.sh checks that each imports). Not
vllm/v1/attention/backends/flashinfer.py: it imports the CUDA-only ``flashinfer``; upstream/kv_specs.py reads the
one method it needs from that file's source."""


def _prepare_environment() -> None:
    """What vLLM must see before its first import on a CPU-only machine with no network."""
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")   # else platform detection looks for CUDA
    os.environ.setdefault("HF_HUB_OFFLINE", "1")        # ModelConfig reads local config.json files only
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("VLLM_DO_NOT_TRACK", "1")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # the failed _C import and CPU notices are logged


_prepare_environment()


def installed_version() -> str | None:
    """The installed vLLM's version (from its distribution metadata, without importing it), or None."""
    from importlib import metadata

    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return None


def unavailable_reason() -> str | None:
    """None when the pinned vLLM is installed and imports here; else why not (a skip reason)."""
    version = installed_version()
    if version is None:
        return f"vLLM is not installed (the upstream tier pins vllm=={PINNED_VERSION}: bash ci/install-upstream.sh)"
    if version != PINNED_VERSION:
        return f"vLLM {version} is installed, the upstream tier pins {PINNED_VERSION} (bash ci/install-upstream.sh)"
    try:
        importlib.import_module("vllm")
    except Exception as exc:  # noqa: BLE001 - any failure to import is the reason
        return f"vLLM {version} does not import: {type(exc).__name__}: {exc}"
    return None


def check_install() -> dict[str, object]:
    """Import every module in MODULES; return {vllm: version, modules: [...]}. Raises naming the module that fails."""
    imported = []
    for name in MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise RuntimeError(f"{name} does not import: {type(exc).__name__}: {exc}") from exc
        imported.append(name)
    import vllm

    return {"vllm": vllm.__version__, "modules": imported}
