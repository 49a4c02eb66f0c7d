"""Known-bad KV quantization modes for the ROAD-V1-MEM upstream gates (kv-quant-modes, kv-quant-mode-of)."""
from __future__ import annotations

from typing import Any

from ..subjects_quant import kv_quant_mode_of, kv_quant_modes

# The port's enum before vLLM 0.33.0's numbering was followed: five members, NVFP4 = 4 (issue 13).
_FIVE_MODES = {"NONE": 0, "FP8_PER_TENSOR": 1, "INT8_PER_TOKEN_HEAD": 2, "FP8_PER_TOKEN_HEAD": 3, "NVFP4": 4}


def modes_nvfp4_is_4() -> dict[str, int]:
    """The five modes the port lays out, NVFP4 numbered 4 (before INT4_PER_TOKEN_HEAD took 4 upstream)."""
    return dict(_FIVE_MODES)


def modes_without_alias() -> dict[str, int]:
    """The distinct members only: CUSTOM, vLLM's alias of OCTAVE_K3V4, missing."""
    return {name: value for name, value in kv_quant_modes().items() if name != "CUSTOM"}


def mode_of_five_modes(cache_dtype: str) -> dict[str, Any]:
    """The old map: only 'nvfp4' itself is NVFP4 (numbered 4), the newer names all NONE."""
    if cache_dtype in ("int8_per_token_head", "fp8_per_token_head"):
        name = cache_dtype.upper()
    elif cache_dtype == "nvfp4":
        name = "NVFP4"
    elif cache_dtype.startswith("fp8"):
        name = "FP8_PER_TENSOR"
    else:
        name = "NONE"
    return {"name": name, "value": _FIVE_MODES[name]}


def mode_of_nvfp4_prefix_first(cache_dtype: str) -> dict[str, Any]:
    """Any 'nvfp4*' tested before the exact 'nvfp4_ds_mla': the DS-MLA layout read as plain NVFP4."""
    if cache_dtype.startswith("nvfp4"):
        return {"name": "NVFP4", "value": 5}
    return kv_quant_mode_of(cache_dtype)
