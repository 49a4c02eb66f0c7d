"""``vllm_model_params`` <-> ``EngineParams``: what zero and negative values mean, and the inverse (CAPI-5.1 to CAPI-5.9).

Mirrors the member copy of vllm_engine_load (the C++ port's vllm_c.cpp); a bad member is refused, never defaulted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from impl.capi.abi import MEMBERS, ModelParams
from impl.capi.errors import InvalidArgument
from impl.entrypoints.model_loader import (
    C_INT_MEMBERS,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DefaultUtilization,
    EngineParams,
    no_c_spelling,
)

MEMBER_NAMES = tuple(name for name, _, _ in MEMBERS)


def _refuse(name: str, value: Any, accepted: str) -> InvalidArgument:
    return InvalidArgument(f"vllm_model_params.{name} must be {accepted}, got {value!r}", field=name)


@dataclass(frozen=True)
class MemberMapping:
    """How one member reads into ``EngineParams`` (``from_c``) and is written back (``to_c``)."""

    name: str
    from_c: Callable[[str, Any], Any]
    to_c: Callable[[str, Any], Any]


def _string_from_c(name: str, raw: bytes | None) -> str | None:
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _refuse(name, raw, f"NULL or UTF-8 text ({err.reason} at byte {err.start})") from None


def _string_to_c(name: str, text: str | None) -> bytes | None:
    if text is None:
        return None
    if "\0" in text:
        raise InvalidArgument(f"EngineParams.{name} has a NUL character, which a C string cannot hold: {text!r}",
                              field=name)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidArgument(f"EngineParams.{name} cannot be written as UTF-8 ({err.reason}): {text!r}",
                              field=name) from None


def _positive_or(default: int) -> Callable[[str, int], int]:
    """<= 0 reads as ``default`` (0 for "auto"/"unset", else the engine default)."""
    return lambda name, raw: raw if raw > 0 else default


def _int_to_c(name: str, value: int) -> int:
    """An int member written as is inside its C type's accepted range (``C_INT_MEMBERS``); refused, never wrapped."""
    _, minimum, maximum = C_INT_MEMBERS[name]
    if not minimum <= value <= maximum:
        raise no_c_spelling(name, value)
    return value


def _choice_from_c(name: str, raw: int) -> int:
    if raw not in (0, 1, 2):
        raise _refuse(name, raw, "0, 1 or 2")
    return raw


def _utilization_from_c(name: str, raw: float) -> float:
    if math.isnan(raw) or not 0.0 <= raw <= 1.0:
        raise _refuse(name, raw, "0.0 (the default, 0.92) or a fraction in (0, 1]")
    return DEFAULT_GPU_MEMORY_UTILIZATION if raw == 0.0 else raw


def _utilization_to_c(name: str, value: float) -> float:
    return 0.0 if isinstance(value, DefaultUtilization) else float(value)


def _bytes_from_c(name: str, raw: int) -> int:
    if raw < 0:
        raise _refuse(name, raw, "0 (unset) or a positive number of bytes")
    return raw


def _same(name: str, value: Any) -> Any:
    return value


_STRING = (_string_from_c, _string_to_c)
_CHOICE = (_choice_from_c, _same)
_KINDS: dict[str, tuple[Callable[[str, Any], Any], Callable[[str, Any], Any]]] = {
    "model_path": _STRING,
    "tokenizer_config_path": _STRING,
    "block_size": (_positive_or(32), _int_to_c),
    "num_blocks": (_positive_or(0), _int_to_c),
    "max_model_len": (_positive_or(0), _int_to_c),
    "max_num_seqs": (_positive_or(32), _int_to_c),
    "tool_parser": _STRING,
    "reasoning_parser": _STRING,
    "speculative_config": _STRING,
    "enable_prefix_caching": _CHOICE,
    "max_num_batched_tokens": (_positive_or(0), _int_to_c),
    "scheduling_policy": _STRING,
    "kv_transfer_config": _STRING,
    "enable_jump_forward": _CHOICE,
    "device": _CHOICE,
    "gpu_memory_utilization": (_utilization_from_c, _utilization_to_c),
    "kv_cache_memory_bytes": (_bytes_from_c, _int_to_c),
}
MAPPINGS: tuple[MemberMapping, ...] = tuple(MemberMapping(name, *_KINDS[name]) for name in MEMBER_NAMES)
"""One mapping per member, in struct order (the order in which members are checked)."""
_BY_NAME = {m.name: m for m in MAPPINGS}


def engine_params_from_values(values: Mapping[str, Any],
                              mappings: tuple[MemberMapping, ...] = MAPPINGS) -> EngineParams:
    """``EngineParams`` from the raw member values of a v16 struct; the first bad member is refused."""
    missing = [name for name in MEMBER_NAMES if name not in values]
    extra = sorted(set(values) - set(MEMBER_NAMES))
    if missing or extra:
        raise TypeError(f"a v16 vllm_model_params has exactly the members {list(MEMBER_NAMES)}; "
                        f"missing {missing}, unknown {extra}")
    read = {m.name: m.from_c(m.name, values[m.name]) for m in mappings}
    try:
        return EngineParams(**read)
    except (TypeError, ValueError) as err:
        raise InvalidArgument(f"vllm_model_params: {err}") from err


def engine_params_from_c(params: ModelParams) -> EngineParams:
    """Read a ``vllm_model_params``: block_size <= 0 is 32, num_blocks <= 0 auto, utilization 0.0 the
    default 0.92 (not explicit), kv_cache_memory_bytes 0 unset; a bad member raises InvalidArgument."""
    if not isinstance(params, ModelParams):
        raise TypeError(f"engine_params_from_c needs a ModelParams, got {type(params).__name__}")
    return engine_params_from_values({name: getattr(params, name) for name in MEMBER_NAMES})


def c_values_from_engine(params: EngineParams, mappings: tuple[MemberMapping, ...] = MAPPINGS) -> dict[str, Any]:
    """The member values that read back as ``params``; a value with no C spelling raises InvalidArgument."""
    if not isinstance(params, EngineParams):
        raise TypeError(f"c_values_from_engine needs EngineParams, got {type(params).__name__}")
    return {m.name: m.to_c(m.name, getattr(params, m.name)) for m in mappings}


def member_to_c(name: str, value: Any) -> Any:
    """The C value of one member as the inverse writes it (int range and string checks included)."""
    return _BY_NAME[name].to_c(name, value)


def model_params_from_engine(params: EngineParams) -> ModelParams:
    """The inverse of :func:`engine_params_from_c`; strings are UTF-8 bytes the struct keeps alive."""
    return ModelParams(**c_values_from_engine(params))
