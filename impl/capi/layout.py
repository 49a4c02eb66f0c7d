"""The mirror's own layout: sizeof, and each member's C type, offset, size and version (CAPI-2.1 to CAPI-2.5).

Read from the ctypes ``ModelParams`` (mirrors spec/include/vllm.h); the gate compares it with the compiler's.
"""
from __future__ import annotations

import ctypes
from typing import Mapping, Sequence

from impl.capi.abi import FIELD_SINCE, ModelParams, VllmStatus

C_TYPE_NAMES: Mapping[type, str] = {
    ctypes.c_int8: "int8_t", ctypes.c_int16: "int16_t", ctypes.c_int32: "int32_t", ctypes.c_int64: "int64_t",
    ctypes.c_uint8: "uint8_t", ctypes.c_uint16: "uint16_t", ctypes.c_uint32: "uint32_t", ctypes.c_uint64: "uint64_t",
    ctypes.c_float: "float", ctypes.c_double: "double", ctypes.c_char_p: "const char *", ctypes.c_void_p: "void *",
}
"""The C spelling of each ctypes member type (int32_t is c_int, int64_t c_long on LP64)."""


def struct_layout(struct: type[ctypes.Structure], since: Mapping[str, int]) -> dict[str, object]:
    """``{"sizeof": n, "fields": [[name, C type, offset, size, since], ...]}`` of a ctypes struct."""
    rows = []
    for name, ctype in struct._fields_:
        descriptor = getattr(struct, name)
        rows.append([name, C_TYPE_NAMES.get(ctype, "other"), descriptor.offset, descriptor.size, since[name]])
    return {"sizeof": ctypes.sizeof(struct), "fields": rows}


def model_params_layout() -> dict[str, object]:
    """The layout of :class:`ModelParams` with the version of each member."""
    return struct_layout(ModelParams, FIELD_SINCE)


_CTYPES_BY_NAME: Mapping[str, type] = {name: ctype for ctype, name in C_TYPE_NAMES.items()}
_CTYPES_BY_NAME = {**_CTYPES_BY_NAME, "char *": ctypes.c_char_p, "const void *": ctypes.c_void_p}


def offsets_of(members: Sequence[tuple[str, str]]) -> dict[str, int] | str:
    """Each member's offset in a struct of ``(name, C type)`` members laid out in order (this machine's ABI), or,
    when a member's type is not one the mirror knows, the reason the offsets cannot be computed."""
    unknown = next(((n, t) for n, t in members if t not in _CTYPES_BY_NAME), None)
    if unknown is not None:
        return f"member {unknown[0]!r} has the C type {unknown[1]!r}, which this reader does not lay out"
    struct = type("Laid", (ctypes.Structure,), {"_fields_": [(n, _CTYPES_BY_NAME[t]) for n, t in members]})
    return {name: getattr(struct, name).offset for name, _ in members}


def status_codes() -> list[list[object]]:
    """``[[name, code], ...]`` of the mirror's ``vllm_status`` in declaration order (CAPI-1.3)."""
    return [[status.name, int(status)] for status in VllmStatus]
