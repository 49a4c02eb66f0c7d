"""The ctypes mirror of ``vllm_model_params`` at ABI v16 and the ``vllm_status`` codes (CAPI-1.1 to CAPI-1.4, CAPI-2.1).

Mirrors spec/include/vllm.h, the normative copy of the C++ port's include/vllm.h.
"""
from __future__ import annotations

import ctypes
from enum import IntEnum
from types import MappingProxyType

VLLM_ABI_VERSION = 16
"""The ABI version this mirror follows; a library reporting another one is refused."""


class VllmStatus(IntEnum):
    """``vllm_status``: what a fallible entry point returns."""

    VLLM_OK = 0
    VLLM_ERR_INVALID_ARGUMENT = 1
    VLLM_ERR_MODEL_LOAD = 2
    VLLM_ERR_RUNTIME = 3
    VLLM_ERR_UNKNOWN = 4


# (member, ctypes type, ABI version that appended it), in the header's order.
MEMBERS: tuple[tuple[str, type, int], ...] = (
    ("model_path", ctypes.c_char_p, 1),
    ("tokenizer_config_path", ctypes.c_char_p, 1),
    ("block_size", ctypes.c_int32, 1),
    ("num_blocks", ctypes.c_int32, 1),
    ("max_model_len", ctypes.c_int32, 1),
    ("max_num_seqs", ctypes.c_int32, 1),
    ("tool_parser", ctypes.c_char_p, 4),
    ("reasoning_parser", ctypes.c_char_p, 5),
    ("speculative_config", ctypes.c_char_p, 6),
    ("enable_prefix_caching", ctypes.c_int32, 7),
    ("max_num_batched_tokens", ctypes.c_int32, 9),
    ("scheduling_policy", ctypes.c_char_p, 9),
    ("kv_transfer_config", ctypes.c_char_p, 9),
    ("enable_jump_forward", ctypes.c_int32, 10),
    ("device", ctypes.c_int32, 14),
    ("gpu_memory_utilization", ctypes.c_double, 16),
    ("kv_cache_memory_bytes", ctypes.c_int64, 16),
)

FIELD_SINCE = MappingProxyType({name: since for name, _, since in MEMBERS})
"""The ABI version that appended each member (the header's "[vN]" annotations)."""


_C_INT_RANGES = {ctypes.c_int32: ("int32_t", -2**31, 2**31 - 1), ctypes.c_int64: ("int64_t", -2**63, 2**63 - 1)}
INT_MEMBER_RANGES = MappingProxyType({name: _C_INT_RANGES[ctype] for name, ctype, _ in MEMBERS
                                      if ctype in _C_INT_RANGES})
"""Each integer member's C type and the least and greatest value it holds."""


def check_member_int(name: str, value: object) -> None:
    """Refuse an int outside its member's C type: ctypes would silently wrap it (2**32 + 5 reads back as 5)."""
    ctype, minimum, maximum = INT_MEMBER_RANGES[name]
    if isinstance(value, int) and not minimum <= value <= maximum:
        raise OverflowError(f"vllm_model_params.{name} is an {ctype}: {value!r} does not fit (accepted: "
                            f"{minimum}..{maximum}); ctypes would wrap it, so it is refused")


class ModelParams(ctypes.Structure):
    """``vllm_model_params``: members, order and C types exactly as the header.

    A string member assigned ``bytes`` keeps that object alive as long as the struct (ctypes holds it
    in ``_objects``); a struct made with ``from_buffer_copy`` owns no strings. An integer member
    assigned a value outside its C type raises OverflowError instead of wrapping (issue 14).
    """

    _fields_ = [(name, ctype) for name, ctype, _ in MEMBERS]

    def __setattr__(self, name: str, value: object) -> None:
        if name in INT_MEMBER_RANGES:
            check_member_int(name, value)
        super().__setattr__(name, value)
