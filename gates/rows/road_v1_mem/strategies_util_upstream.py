"""Generated util-path-num-blocks inputs for ``upstream-profile-util-blocks`` (gate.yaml; upstream/gates_fit.py
``util_path_num_blocks``): profile-util-blocks' inputs, profiled only (vLLM always profiles or takes the byte knob),
and with block counts the port can hold (an int32, MEM-3.5), which vLLM does not bound; ``util_deviation_inputs``
for ``upstream-util-path-deviations``, the rest."""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from .strategies_profile import blocks_inputs

_INT32_MAX = (1 << 31) - 1
_WIDTHS = {"float16": 2, "bfloat16": 2, "float32": 4}


def _block_bytes(kv: dict[str, Any]) -> int:
    """A lower bound of one block's bytes: K and V of every layer at the dtype's width (the dtype names of
    strategies_profile; an unknown name counts one byte)."""
    return 2 * kv["num_layers"] * kv["block_size"] * kv["num_kv_heads"] * kv["head_size"] * \
        _WIDTHS.get(kv["dtype"], 1)


def _fits_int32(case: dict[str, Any]) -> bool:
    ceiling = max(case["kv_cache_memory_bytes"], case["snapshots"]["before_create"]["total_memory"])
    return ceiling // _block_bytes(case["kv"]) <= _INT32_MAX


def profiled_blocks_inputs() -> st.SearchStrategy[dict[str, Any]]:
    """blocks_inputs with a profile, whose pools the port's int32 block count holds."""
    return blocks_inputs().map(lambda case: {**case, "profiled": True}).filter(_fits_int32)


def util_deviation_inputs() -> st.SearchStrategy[dict[str, Any]]:
    """blocks_inputs where the port's util path differs from vLLM's as declared: no profile (the 256-block
    fallback, or the byte knob alone), or a pool that may count more blocks than an int32 holds."""
    return blocks_inputs().filter(lambda case: not case["profiled"] or not _fits_int32(case))
