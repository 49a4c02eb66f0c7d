"""The stand-in engine library compiled from the header, read through the compiler's layout (CAPI-4, CAPI-6, CAPI-9).

Structs cross as raw bytes at the measured offsets, never through a Python mirror; mirrors the C++ port's vllm_c.cpp.
"""
from __future__ import annotations

import ctypes
import struct
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping

from oracles.abi.header import read_status_codes
from oracles.abi.layout import MeasuredLayout, measure
from oracles.abi.toolchain import build

_SOURCE = Path(__file__).with_name("params_lib.c")
_SCALARS = {"int32_t": "=i", "int64_t": "=q", "double": "=d", "float": "=f"}
_POINTERS = ("const char *", "char *")


class OracleLibrary:
    """One compiled library and the layout of the header it was built from."""

    def __init__(self, header_text: str):
        self.layout: MeasuredLayout = measure(header_text)
        self.statuses = read_status_codes(header_text)
        self.path = build("vllm_oracle", header_text, _SOURCE.read_text(encoding="utf-8"), shared=True)
        self._lib = ctypes.CDLL(str(self.path))
        self._lib.vllm_abi_version.restype = ctypes.c_int32
        self._lib.vllm_abi_version.argtypes = []
        self._lib.vllm_oracle_default_into.argtypes = [ctypes.c_void_p]
        self._lib.vllm_oracle_default_via.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self._lib.vllm_oracle_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self._lib.vllm_oracle_copy.restype = ctypes.c_int
        self._lib.vllm_oracle_release.argtypes = [ctypes.c_void_p]
        self._lib.vllm_oracle_check.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_char_p),
                                                ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p,
                                                ctypes.POINTER(ctypes.c_int32)]
        self._lib.vllm_oracle_check.restype = ctypes.c_int32

    def abi_version(self) -> int:
        """What ``vllm_abi_version()`` returns."""
        return int(self._lib.vllm_abi_version())

    def default_values(self) -> dict[str, Any]:
        """The members of ``vllm_model_params_default()``; a string member reads as bytes, NULL as None."""
        buffer = ctypes.create_string_buffer(self.layout.size)
        self._lib.vllm_oracle_default_into(buffer)
        return self.decode(buffer.raw)

    def default_values_of(self, library: str | Path) -> dict[str, Any]:
        """The members of another library's ``vllm_model_params_default()``, read at this header's offsets."""
        other = ctypes.CDLL(str(library))
        make_default = ctypes.cast(other.vllm_model_params_default, ctypes.c_void_p)
        buffer = ctypes.create_string_buffer(self.layout.size)
        self._lib.vllm_oracle_default_via(make_default, buffer)
        return self.decode(buffer.raw)

    @contextmanager
    def copied(self, raw: bytes) -> Iterator[bytes]:
        """Raw bytes of a field-by-field C copy of ``raw``; its strings live until the block ends."""
        source = ctypes.create_string_buffer(bytes(raw).ljust(self.layout.size, b"\0"), self.layout.size)
        target = ctypes.create_string_buffer(self.layout.size)
        if self._lib.vllm_oracle_copy(source, target) != 0:
            raise MemoryError("vllm_oracle_copy could not allocate its strings")
        try:
            yield target.raw
        finally:
            self._lib.vllm_oracle_release(target)

    def check(self, values: Mapping[str, Any], bytes_per_block: int) -> dict[str, Any]:
        """The C verdict on a struct holding ``values`` (other members zero): status code and name, the
        member at fault, the block count, and what each member means (``read``, strings as text)."""
        keep: list[Any] = []
        raw = ctypes.create_string_buffer(self.encode(values, keep), self.layout.size)
        read = ctypes.create_string_buffer(self.layout.size)
        field, blocks, chosen = ctypes.c_char_p(), ctypes.c_int64(), ctypes.c_int32()
        code = int(self._lib.vllm_oracle_check(raw, bytes_per_block, ctypes.byref(field), ctypes.byref(blocks), read,
                                               ctypes.byref(chosen)))
        if self.statuses[code] != "VLLM_OK":
            return {"status": self.statuses[code], "code": code, "field": field.value.decode(), "num_blocks": None,
                    "read": None}
        meaning = {name: value.decode("utf-8") if isinstance(value, bytes) else value
                   for name, value in self.decode(read.raw).items()}
        meaning["gpu_memory_utilization_is_explicit"] = bool(chosen.value)
        return {"status": "VLLM_OK", "code": code, "field": None, "num_blocks": blocks.value, "read": meaning}

    def encode(self, values: Mapping[str, Any], keep: list[Any]) -> bytes:
        """Bytes of a struct with ``values`` at the measured offsets; string buffers go into ``keep``."""
        members = {f.name: f for f in self.layout.fields}
        unknown = set(values) - set(members)
        if unknown:
            raise KeyError(f"the header's struct has no member {sorted(unknown)}")
        out = bytearray(self.layout.size)
        for name, value in values.items():
            member = members[name]
            if member.ctype in _POINTERS:
                address = 0
                if value is not None:
                    text = ctypes.create_string_buffer(bytes(value))
                    keep.append(text)
                    address = ctypes.addressof(text)
                struct.pack_into("=Q" if member.size == 8 else "=I", out, member.offset, address)
            else:
                struct.pack_into(_SCALARS[member.ctype], out, member.offset, value)
        return bytes(out)

    def decode(self, raw: bytes) -> dict[str, Any]:
        """Member values of a struct's raw bytes; strings are read from the addresses they hold."""
        values: dict[str, Any] = {}
        for member in self.layout.fields:
            if member.ctype in _POINTERS:
                (address,) = struct.unpack_from("=Q" if member.size == 8 else "=I", raw, member.offset)
                values[member.name] = ctypes.string_at(address) if address else None
            else:
                (values[member.name],) = struct.unpack_from(_SCALARS[member.ctype], raw, member.offset)
        return values


@lru_cache(maxsize=16)
def load(header_text: str) -> OracleLibrary:
    """The compiled library for ``header_text`` (built once per process and cached on disk by hash)."""
    return OracleLibrary(header_text)


def _library(header: str | Path) -> OracleLibrary:
    return load(Path(header).read_text(encoding="utf-8"))


def c_default_values(header: str | Path, library: str | Path | None = None) -> dict[str, Any]:
    """``vllm_model_params_default()`` of ``library`` (default: the stand-in built from the header at ``header``),
    read at the compiler's offsets for that header; strings as UTF-8 text."""
    built = _library(header)
    values = built.default_values() if library is None else built.default_values_of(library)
    return {name: value.decode("utf-8") if isinstance(value, bytes) else value for name, value in values.items()}


def c_check(header: str | Path, values: Mapping[str, Any], bytes_per_block: int) -> dict[str, Any]:
    """The C library's verdict on a struct with ``values``: ``{"status", "code", "field", "num_blocks", "read"}``."""
    return _library(header).check(values, bytes_per_block)


def c_abi_version(header: str | Path) -> int:
    """``vllm_abi_version()`` of the library built from the header at ``header``: the header's own version."""
    return _library(header).abi_version()


def stand_in_library(header: str | Path) -> Path:
    """The stand-in engine library built from the header at ``header`` (the library the gates use by default)."""
    return _library(header).path


def handshake_library(header_text: str) -> Path:
    """A library built from any header that only answers ``vllm_abi_version()`` (and a zeroed default)."""
    return build("vllm_handshake", header_text, _SOURCE.with_name("handshake_lib.c").read_text(encoding="utf-8"),
                 shared=True)
