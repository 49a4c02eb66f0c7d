"""vLLM's KV-cache quantization modes and the ``--kv-cache-dtype`` strings, as plain data (ROAD-V1-MEM M2).

vLLM 0.33.0 names the enum ``KVQuantMode`` (vllm/v1/kv_cache_interface.py) and maps a cache-dtype string to a
mode with ``get_kv_quant_mode`` (same file); the strings ``--kv-cache-dtype`` accepts are ``CacheDType`` /
``KV_CACHE_DTYPES`` (vllm/config/cache.py) and their storage dtypes ``STR_DTYPE_TO_TORCH_DTYPE``
(vllm/utils/torch_utils.py).
"""
from __future__ import annotations

import upstream  # noqa: F401  (environment before vLLM's import)

from vllm.config.cache import KV_CACHE_DTYPES
from vllm.utils.torch_utils import STR_DTYPE_TO_TORCH_DTYPE
from vllm.v1.kv_cache_interface import KVQuantMode, get_kv_quant_mode, kv_cache_uses_per_token_head_scales


def quant_modes() -> dict[str, int]:
    """``KVQuantMode``'s members by name -> value, aliases included (vllm/v1/kv_cache_interface.py).

    An IntEnum member whose value repeats an earlier one is an alias of it (0.33.0: ``CUSTOM = 12`` is
    ``OCTAVE_K3V4``); ``__members__`` lists aliases too, so they show here.
    """
    return {name: int(member) for name, member in KVQuantMode.__members__.items()}


def canonical_quant_modes() -> dict[str, int]:
    """The distinct members (iteration order, no aliases) name -> value (vllm/v1/kv_cache_interface.py)."""
    return {member.name: int(member) for member in KVQuantMode}


def quant_mode_aliases() -> dict[str, str]:
    """Alias name -> the member it aliases (vllm/v1/kv_cache_interface.py KVQuantMode)."""
    return {name: member.name for name, member in KVQuantMode.__members__.items() if member.name != name}


def quant_mode_of(cache_dtype: str) -> str:
    """``get_kv_quant_mode(cache_dtype).name`` (vllm/v1/kv_cache_interface.py); any string is mapped, known or not."""
    return get_kv_quant_mode(cache_dtype).name


def quant_mode_value_of(cache_dtype: str) -> int:
    """``int(get_kv_quant_mode(cache_dtype))`` (vllm/v1/kv_cache_interface.py)."""
    return int(get_kv_quant_mode(cache_dtype))


def cache_dtypes() -> list[str]:
    """The ``--kv-cache-dtype`` values vLLM accepts, in its order (``KV_CACHE_DTYPES``, vllm/config/cache.py)."""
    return list(KV_CACHE_DTYPES)


def cache_dtype_modes() -> dict[str, str]:
    """Every accepted ``--kv-cache-dtype`` string -> its mode's name (vllm/config/cache.py, kv_cache_interface.py)."""
    return {name: get_kv_quant_mode(name).name for name in KV_CACHE_DTYPES}


def storage_dtypes() -> dict[str, str]:
    """``STR_DTYPE_TO_TORCH_DTYPE`` as names: cache-dtype string -> torch dtype name (vllm/utils/torch_utils.py)."""
    return {name: str(value).removeprefix("torch.") for name, value in STR_DTYPE_TO_TORCH_DTYPE.items()}


def mode_flags(mode: str) -> dict[str, bool]:
    """The ``KVQuantMode`` properties of one member by name (vllm/v1/kv_cache_interface.py)."""
    member = KVQuantMode[mode]
    return {"is_per_token_head": member.is_per_token_head, "is_nvfp4": member.is_nvfp4,
            "is_turboquant": member.is_turboquant, "is_octave": member.is_octave,
            "is_ultraquant": member.is_ultraquant, "is_custom_mode": member.is_custom_mode}


def uses_per_token_head_scales(cache_dtype: str) -> bool:
    """``kv_cache_uses_per_token_head_scales(cache_dtype)`` (vllm/v1/kv_cache_interface.py)."""
    return bool(kv_cache_uses_per_token_head_scales(cache_dtype))
