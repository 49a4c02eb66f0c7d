"""Open an engine library through ctypes, refusing one built for another ABI version (CAPI-8.1, CAPI-8.2).

Mirrors the version handshake FFI consumers of the C++ port do with ``vllm_abi_version()`` (include/vllm.h).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from impl.capi.abi import VLLM_ABI_VERSION, ModelParams
from impl.capi.errors import AbiVersionMismatch


@dataclass(frozen=True)
class CapiLibrary:
    """A loaded library whose ``vllm_abi_version()`` equals this mirror's ``VLLM_ABI_VERSION``."""

    path: Path
    handle: ctypes.CDLL
    abi_version: int

    def model_params_default(self) -> ModelParams:
        """The library's ``vllm_model_params_default()``, returned by value into the mirror."""
        function = self.handle.vllm_model_params_default
        function.argtypes = []
        function.restype = ModelParams
        return function()


def open_library(path: str | Path, expected_version: int = VLLM_ABI_VERSION) -> CapiLibrary:
    """Load ``path`` and check its ABI version before anything else is called."""
    location = Path(path)
    handle = ctypes.CDLL(str(location))
    try:
        query = handle.vllm_abi_version
    except AttributeError:
        raise AbiVersionMismatch(f"{location} exports no vllm_abi_version(); it is not a vllm C ABI library") from None
    query.argtypes = []
    query.restype = ctypes.c_int32
    reported = int(query())
    if reported != expected_version:
        raise AbiVersionMismatch(
            f"{location} was built for vllm C ABI v{reported} but this binding mirrors v{expected_version} "
            f"(spec/include/vllm.h); the struct layouts differ, so it is refused. Rebuild the library "
            f"against the v{expected_version} header, or use a binding for v{reported}.")
    return CapiLibrary(location, handle, reported)


def checked_abi_version(library_path: str | Path) -> int:
    """The ABI version of the library at ``library_path``, if it is this mirror's; AbiVersionMismatch otherwise."""
    return open_library(library_path).abi_version
