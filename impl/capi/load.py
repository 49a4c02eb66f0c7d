"""The sizing step of ``vllm_engine_load`` and its status mapping (CAPI-9.1 to CAPI-9.3).

Mirrors vllm_c.cpp of the C++ port, except that a KV budget below one block is VLLM_ERR_INVALID_ARGUMENT,
as its header promises (the port answered VLLM_ERR_MODEL_LOAD there).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from impl.capi.abi import ModelParams, VllmStatus
from impl.capi.convert import engine_params_from_c
from impl.capi.errors import CapiError
from impl.entrypoints.model_loader import EngineParams, NoKVBytesPerBlockError, resolve_num_blocks

if TYPE_CHECKING:  # torch-free at import: the example CLI imports this package
    from impl.v1.kv_cache_interface import KVCacheConfig


@dataclass(frozen=True)
class LoadResult:
    """What the load reports: a status, the last-error text, and on success the params and block count."""

    status: VllmStatus
    error: str | None = None
    engine_params: EngineParams | None = None
    num_blocks: int | None = None


def _sizing_member(params: EngineParams) -> str:
    """The member whose value the pool resolution acted on (the one a resolution error is about); a positive
    num_blocks is taken as given and never refused (MEM-1.2), so it is never that member."""
    return "kv_cache_memory_bytes" if params.kv_cache_memory_bytes > 0 else "gpu_memory_utilization"


def engine_load(params: ModelParams, probe: KVCacheConfig, profile: Any = None) -> LoadResult:
    """Read ``params`` and size the KV pool for the model ``probe``; never raises for a bad argument."""
    try:
        engine_params = engine_params_from_c(params)
    except CapiError as err:
        return LoadResult(err.status, str(err))
    try:
        blocks = resolve_num_blocks(engine_params, probe, profile)
    except NoKVBytesPerBlockError as err:  # the model, not an argument, cannot be sized: as the port's runtime_error
        return LoadResult(VllmStatus.VLLM_ERR_MODEL_LOAD, str(err))
    except ValueError as err:
        member = _sizing_member(engine_params)
        return LoadResult(VllmStatus.VLLM_ERR_INVALID_ARGUMENT, f"vllm_model_params.{member}: {err}")
    except (RuntimeError, OSError) as err:
        return LoadResult(VllmStatus.VLLM_ERR_MODEL_LOAD, str(err))
    return LoadResult(VllmStatus.VLLM_OK, None, engine_params, blocks)
