"""Known-bad sizing-knob implementations for ROAD-V1-MEM M1 (and the M2 byte-budget divisor); each must be rejected."""
from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

from impl.entrypoints.model_loader import EngineParams, resolve_num_blocks
from impl.entrypoints.sizes import BINARY_UNITS, parse_size
from impl.v1.kv_cache_interface import kv_bytes_per_block

from ..subjects import blocks_and_warning, engine_params_view, params_from_argv

# --- resolve_num_blocks(params, probe, profile=None) ---------------------------------------------------


def bytes_scaled_by_utilization(params: EngineParams, probe: Any, profile: Any = None) -> int:
    """The byte budget multiplied by gpu_memory_utilization before dividing."""
    if params.num_blocks == 0 and params.kv_cache_memory_bytes > 0:
        scaled = int(params.kv_cache_memory_bytes * float(params.gpu_memory_utilization))
        return resolve_num_blocks(replace(params, kv_cache_memory_bytes=max(scaled, 1)), probe, profile)
    return resolve_num_blocks(params, probe, profile)


def bytes_beat_override(params: EngineParams, probe: Any, profile: Any = None) -> int:
    """The byte budget checked before the num_blocks override."""
    if params.kv_cache_memory_bytes > 0:
        return resolve_num_blocks(replace(params, num_blocks=0), probe, profile)
    return resolve_num_blocks(params, probe, profile)


def sub_block_budget_gives_zero(params: EngineParams, probe: Any, profile: Any = None) -> int:
    """A budget below one block silently yields 0 blocks."""
    if params.num_blocks == 0 and 0 < params.kv_cache_memory_bytes < kv_bytes_per_block(probe):
        return 0
    return resolve_num_blocks(params, probe, profile)


def budget_rounded_to_nearest(params: EngineParams, probe: Any, profile: Any = None) -> int:
    """The budget divided with rounding instead of floor."""
    if params.num_blocks == 0 and params.kv_cache_memory_bytes > 0:
        return round(params.kv_cache_memory_bytes / kv_bytes_per_block(probe))
    return resolve_num_blocks(params, probe, profile)


def override_clamped_to_budget(params: EngineParams, probe: Any, profile: Any = None) -> int:
    """The override shrunk to what the byte budget holds (the override must win unchecked)."""
    if params.num_blocks > 0 and params.kv_cache_memory_bytes > 0:
        return min(params.num_blocks, params.kv_cache_memory_bytes // kv_bytes_per_block(probe))
    return resolve_num_blocks(params, probe, profile)


def profile_ignored(params: EngineParams, probe: Any, profile: Any = None) -> int:
    """The memory profile never consulted: the utilization path always falls back."""
    return resolve_num_blocks(params, probe, None)


# --- blocks_and_warning(params, probe, profile=None) ---------------------------------------------------


def warns_on_default_utilization(params: EngineParams, probe: Any, profile: Any = None) -> dict[str, Any]:
    """The fallback warns even when nobody chose a utilization (the C-ABI 0.92 default as explicit)."""
    result = blocks_and_warning(params, probe, profile)
    decided_by_fallback = params.num_blocks == 0 and params.kv_cache_memory_bytes == 0 and profile is None
    return {**result, "warned": result["warned"] or decided_by_fallback}


def never_warns(params: EngineParams, probe: Any, profile: Any = None) -> dict[str, Any]:
    return {**blocks_and_warning(params, probe, profile), "warned": False}


def warns_whenever_explicit(params: EngineParams, probe: Any, profile: Any = None) -> dict[str, Any]:
    """Warns about an explicit utilization even when the override or a budget sized the pool."""
    result = blocks_and_warning(params, probe, profile)
    return {**result, "warned": params.gpu_memory_utilization_is_explicit}


# --- engine_params(**fields) ---------------------------------------------------------------------------


def utilization_unchecked(**fields: Any) -> dict[str, Any]:
    """Any utilization accepted: NaN, 0, above 1."""
    utilization = fields.pop("gpu_memory_utilization", None)
    params = EngineParams(**fields)
    if utilization is not None:
        object.__setattr__(params, "gpu_memory_utilization", utilization)
    return engine_params_view(params)


def bools_taken_as_ints(**fields: Any) -> dict[str, Any]:
    """True/False accepted as 1/0 for integer knobs."""
    return engine_params_view(EngineParams(**{k: int(v) if isinstance(v, bool) else v for k, v in fields.items()}))


def negative_bytes_clamped(**fields: Any) -> dict[str, Any]:
    """A negative byte budget silently treated as unset."""
    if isinstance(fields.get("kv_cache_memory_bytes"), int):
        fields["kv_cache_memory_bytes"] = max(0, fields["kv_cache_memory_bytes"])
    return engine_params_view(EngineParams(**fields))


def default_counts_as_explicit(**fields: Any) -> dict[str, Any]:
    """The default utilization indistinguishable from a chosen 0.92."""
    return {**engine_params_view(EngineParams(**fields)), "utilization_explicit": True}


# --- params_from_argv(argv) ----------------------------------------------------------------------------


def cpp_strtoll_kv_memory(argv: list[str]) -> dict[str, Any]:
    """--kv-cache-memory read like the C++ CLI's strtoll: leading digits, 0 when there are none."""
    argv = list(argv)
    for i, arg in enumerate(argv[:-1]):
        if arg in ("--kv-cache-memory", "--kv-cache-memory-bytes"):
            argv[i + 1] = re.match(r"\s*(\d*)", argv[i + 1]).group(1) or "0"
    return params_from_argv(argv)


def utilization_flag_defaults_to_092(argv: list[str]) -> dict[str, Any]:
    """The flag's default is 0.92 itself, so every run looks explicit (the example CLI before #1165)."""
    if "--gpu-memory-utilization" not in argv:
        argv = [*argv, "--gpu-memory-utilization", "0.92"]
    return params_from_argv(argv)


# --- parse_size(text, *, what) -------------------------------------------------------------------------


def size_leading_digits(text: str, *, what: str) -> int:
    """The C++ port's reading: the leading digits, the rest ignored ("4GiB" is 4)."""
    digits = re.match(r"\s*(\d+)", text)
    if digits is None:
        raise ValueError(f"{what}: {text!r}")
    return int(digits.group(1))


def size_lowercase_binary(text: str, *, what: str) -> int:
    """Lowercase k/m/g/t read as binary."""
    stripped = text.strip()
    if stripped[-1:] in ("k", "m", "g", "t") and stripped[:-1].isdigit():
        return int(stripped[:-1]) * BINARY_UNITS[stripped[-1].upper()]
    return parse_size(text, what=what)


def size_binary_fraction_allowed(text: str, *, what: str) -> int:
    """A fraction accepted with a binary unit ("4.5G") and truncated."""
    match = re.fullmatch(r"\s*(\d+\.\d+)\s*(K|M|G|T|KiB|MiB|GiB|TiB)\s*", text)
    if match:
        return math.floor(float(match.group(1)) * BINARY_UNITS[match.group(2)])
    return parse_size(text, what=what)


def size_fraction_truncated(text: str, *, what: str) -> int:
    """A fraction of a byte dropped instead of refused ("1.0005k" is 1000)."""
    match = re.fullmatch(r"\s*(\d+\.\d+)\s*(k|m|g|t|KB|MB|GB|TB)\s*", text)
    if match:
        scale = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}[match.group(2)[0].lower()]
        return int(float(match.group(1)) * scale)
    return parse_size(text, what=what)


def size_vllm_only(text: str, *, what: str) -> int:
    """vLLM's reading alone: explicit units such as "4GiB" or "4 GB" refused."""
    if re.search(r"[KMGT]i?B\s*$", text.strip()) or " " in text.strip():
        raise ValueError(f"{what}: {text!r}")
    return parse_size(text, what=what)
