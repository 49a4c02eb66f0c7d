"""Open an engine library through ctypes, refusing one built for another ABI version (CAPI-8.1 to CAPI-8.3).

Mirrors the version handshake FFI consumers of the C++ port do with ``vllm_abi_version()`` (include/vllm.h). The
refusal says whether ``vllm_model_params`` differs between the two versions only when it can tell: from the header
the library was built from (its history gives each version's members).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from impl.capi.abi import MEMBERS, VLLM_ABI_VERSION, ModelParams
from impl.capi.errors import AbiHistoryError, AbiVersionMismatch
from impl.capi.header_reader import read_header
from impl.capi.history import check_history
from impl.capi.layout import C_TYPE_NAMES

_MIRROR = [(name, C_TYPE_NAMES[ctype]) for name, ctype, _ in MEMBERS]


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


def _first_difference(theirs: list[tuple[str, str]], reported: int, expected: int) -> str:
    for index, (mine, other) in enumerate(zip(_MIRROR, theirs)):
        if mine != other:
            return (f"member {index + 1} is {other[1]} {other[0]} in v{reported} but {mine[1]} {mine[0]} in "
                    f"v{expected}")
    common = min(len(theirs), len(_MIRROR))
    longer, longer_version, shorter_version = ((theirs, reported, expected) if len(theirs) > len(_MIRROR)
                                               else (_MIRROR, expected, reported))
    return f"v{shorter_version} ends before {longer[common][0]}, member {common + 1} of v{longer_version}"


def layout_verdict(header_text: str | None, reported: int, expected: int = VLLM_ABI_VERSION) -> str:
    """What the library's header says about ``vllm_model_params`` in v``reported`` against this mirror: the same,
    different (and where), or not known (no header, a header of another version, or an unreadable history)."""
    if header_text is None:
        return "whether vllm_model_params differs is not known without the library's header"
    try:
        facts = read_header(header_text)
        check_history(facts)
    except AbiHistoryError as err:
        return f"whether vllm_model_params differs is not known: the library's header is refused ({err})"
    if facts.abi_version != reported:
        return (f"whether vllm_model_params differs is not known: the header given for the library is "
                f"v{facts.abi_version}, not v{reported}")
    theirs = [(m.name, m.ctype) for m in facts.members]
    if theirs == _MIRROR:
        return (f"vllm_model_params is the same in v{reported} and v{expected} (the versions between them changed "
                "entry points only)")
    return f"the vllm_model_params layouts differ: {_first_difference(theirs, reported, expected)}"


def open_library(path: str | Path, expected_version: int = VLLM_ABI_VERSION,
                 header_text: str | None = None) -> CapiLibrary:
    """Load ``path`` and check its ABI version before anything else is called. ``header_text``, the header the
    library was built from, lets a refusal say whether the struct layouts differ."""
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
            f"(spec/include/vllm.h), so it is refused: the entry points of two ABI versions differ, and "
            f"{layout_verdict(header_text, reported, expected_version)}. Rebuild the library against the "
            f"v{expected_version} header, or use a binding for v{reported}.")
    return CapiLibrary(location, handle, reported)


def checked_abi_version(library_path: str | Path, header_text: str | None = None) -> int:
    """The ABI version of the library at ``library_path``, if it is this mirror's; AbiVersionMismatch otherwise."""
    return open_library(library_path, header_text=header_text).abi_version
