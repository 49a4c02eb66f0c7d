"""Errors of the C ABI layer, each carrying the ``vllm_status`` it maps to (CAPI-9.1 to CAPI-9.3).

Mirrors the status mapping of the C++ port's vllm_c.cpp (argument errors, load errors, the rest).
"""
from __future__ import annotations

from impl.capi.abi import VllmStatus


class CapiError(Exception):
    """An error an entry point reports as ``status``; ``field`` is the struct member at fault, if one is."""

    status = VllmStatus.VLLM_ERR_UNKNOWN

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field


class InvalidArgument(CapiError, ValueError):
    """A NULL, malformed or out-of-range argument: ``VLLM_ERR_INVALID_ARGUMENT``."""

    status = VllmStatus.VLLM_ERR_INVALID_ARGUMENT


class ModelLoadFailed(CapiError, RuntimeError):
    """The model could not be loaded: ``VLLM_ERR_MODEL_LOAD``."""

    status = VllmStatus.VLLM_ERR_MODEL_LOAD


class AbiVersionMismatch(RuntimeError):
    """A library built for another ABI version than this mirror's; it must not be used."""


class AbiHistoryError(ValueError):
    """A header whose version history is not append-only, or whose annotations cannot be read."""
