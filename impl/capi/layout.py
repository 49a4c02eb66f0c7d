"""The mirror's own layout: sizeof, and each member's C type, offset, size and version (CAPI-2.1 to CAPI-2.5).

Read from the ctypes ``ModelParams`` (mirrors spec/include/vllm.h); the gate compares it with the compiler's.
"""
from __future__ import annotations

import ctypes
from typing import Mapping

from impl.capi.abi import FIELD_SINCE, ModelParams

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
