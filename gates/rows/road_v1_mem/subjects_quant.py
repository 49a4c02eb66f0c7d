"""Plain-data views of the port's KV quantization modes (impl/v1/kv_cache_interface.py) for the ROAD-V1-MEM
operations kv-quant-modes and kv-quant-mode-of: an IntEnum member is not plain data, so it goes as name and value."""
from __future__ import annotations

from typing import Any

from impl.v1.kv_cache_interface import KVQuantMode, kv_quant_mode_for


def kv_quant_modes() -> dict[str, int]:
    """Every ``KVQuantMode`` member name, aliases included, and its value."""
    return {name: int(member) for name, member in KVQuantMode.__members__.items()}


def kv_quant_mode_of(cache_dtype: str) -> dict[str, Any]:
    """The mode a ``kv_cache_dtype`` string implies: ``{name, value}``."""
    mode = kv_quant_mode_for(cache_dtype)
    return {"name": mode.name, "value": int(mode)}
