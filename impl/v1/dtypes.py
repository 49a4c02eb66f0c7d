"""Dtypes by name, with or without torch: ``PlainDType`` stands in for a ``torch.dtype`` (MEM-2.8, MEM-2.12).

KV specs only read a dtype's name and ``itemsize``; ``kv-plan`` builds them from plain dtypes so that it
answers without importing torch, while the gates and tests build them from ``torch.dtype`` objects.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    import torch

ITEMSIZES = {"float32": 4, "float16": 2, "bfloat16": 2, "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
"""Bytes per element of every dtype a KV spec is built with, by torch's name."""


@dataclass(frozen=True)
class PlainDType:
    """A dtype as plain data: torch's name (``bfloat16``) and its bytes per element."""

    name: str
    itemsize: int

    def __str__(self) -> str:
        return self.name


PLAIN_DTYPES = {name: PlainDType(name, size) for name, size in ITEMSIZES.items()}
DType = Union["torch.dtype", PlainDType]


def is_torch_dtype(value: object) -> bool:
    """True for a ``torch.dtype``; never imports torch (without torch loaded there is no torch.dtype)."""
    torch_module = sys.modules.get("torch")
    return torch_module is not None and isinstance(value, torch_module.dtype)


def is_dtype(value: object) -> bool:
    """A ``torch.dtype`` or a ``PlainDType``: what a KV spec accepts as its dtype."""
    return isinstance(value, PlainDType) or is_torch_dtype(value)


def dtype_name(value: object) -> str | None:
    """torch's name of a dtype (``bfloat16`` for ``torch.bfloat16``); None for anything that is not one."""
    if isinstance(value, PlainDType):
        return value.name
    if is_torch_dtype(value):
        return str(value).removeprefix("torch.")
    return None


def dtype_like(name: str, like: DType | None) -> DType:
    """The dtype ``name`` of the same kind as ``like``: a ``PlainDType`` beside one, else a ``torch.dtype``."""
    if isinstance(like, PlainDType):
        return PLAIN_DTYPES[name]
    import torch  # the torch kind is asked for only by callers that already use torch

    return getattr(torch, name)
