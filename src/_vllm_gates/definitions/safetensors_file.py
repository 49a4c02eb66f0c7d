"""A `.safetensors` file read within its own header's word (tensor fixtures, docs/gate-files.md): the 8-byte little-endian
header length, the JSON header (name -> dtype, shape, data_offsets), then the byte buffer. The header is checked
against the file's size before any tensor is read: every offset inside the buffer, every entry's byte count equal to
its shape times its dtype's size, the entries covering the buffer without holes or overlaps. Nothing is read past
the end of the file; a short read is refused, never padded.
"""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from io import FileIO
from math import prod
from pathlib import Path
from typing import Any

from _vllm_gates.base.errors import GatesError

MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors format's own bound on its JSON header
# the format's dtype names and their sizes in bytes; CARRIED maps those the protocol carries to its names
ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
            "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
CARRIED = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "I32": "int32", "I64": "int64",
           "F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64"}
METADATA = "__metadata__"


class FixtureFileError(GatesError):
    """A `.safetensors` file that cannot be read as its header says: the message names the file's problem (the
    caller adds the file's name and the case's place)."""


@dataclass(frozen=True)
class StoredTensor:
    """One header entry: its name, its dtype as the file names it, its shape, and where its bytes lie in the file."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int  # absolute offset in the file
    end: int


def read_header(path: Path) -> dict[str, StoredTensor]:
    """The file's tensors by name, each checked against the file's size (module docstring); FixtureFileError else."""
    header, base, buffer_size = _header(path)
    return _entries(header, base, buffer_size)


def read_metadata(path: Path) -> dict[str, str]:
    """The file's `__metadata__` (a map of strings; empty where it has none), its tensors checked as read_header does."""
    header, base, buffer_size = _header(path)
    _entries(header, base, buffer_size)
    return dict(header.get(METADATA, {}))


def _header(path: Path) -> tuple[dict, int, int]:
    """The JSON header, where the data starts and how many data bytes follow it."""
    with _open(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        head = _read_up_to(handle, 8)
        if len(head) < 8:
            raise FixtureFileError(f"is {size} bytes, shorter than the 8-byte header length that starts a .safetensors file")
        length = int.from_bytes(head, "little")
        if length > MAX_HEADER_BYTES:
            raise FixtureFileError(f"says its header is {length} bytes, past the format's limit of {MAX_HEADER_BYTES}")
        if 8 + length > size:
            raise FixtureFileError(f"says its header is {length} bytes, but the file holds only {size - 8} after the "
                                   "header length (a truncated or lying header)")
        text = _read_up_to(handle, length)
    if len(text) != length:
        raise FixtureFileError(f"ended after {len(text)} of its {length} header bytes (it shrank while read)")
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FixtureFileError(f"has a header that is not UTF-8 JSON: {exc}") from None
    if type(header) is not dict:
        raise FixtureFileError(f"has a header that is a JSON {type(header).__name__}, not an object of tensors")
    return header, 8 + length, size - 8 - length


def _entries(header: dict, base: int, buffer_size: int) -> dict[str, StoredTensor]:
    found: dict[str, StoredTensor] = {}
    for name, entry in header.items():
        if name == METADATA:
            if type(entry) is not dict or not all(type(v) is str for v in entry.values()):
                raise FixtureFileError(f"has a {METADATA} that is not a map of strings")
            continue
        found[name] = _entry(name, entry, base, buffer_size)
    covered = 0
    for entry in sorted(found.values(), key=lambda e: (e.start, e.end)):
        if entry.start != base + covered:
            what = "overlaps the tensor before it" if entry.start < base + covered else "leaves a hole before it"
            raise FixtureFileError(f"has tensor {entry.name!r} at data offset {entry.start - base}, which {what} "
                                   f"(the buffer is covered up to offset {covered})")
        covered = entry.end - base
    if covered != buffer_size:
        raise FixtureFileError(f"holds {buffer_size} data bytes, but its header's tensors cover {covered} (a header "
                               "that lies about sizes, or bytes appended)")
    return found


def _entry(name: str, entry: object, base: int, buffer_size: int) -> StoredTensor:
    if type(entry) is not dict or set(entry) != {"dtype", "shape", "data_offsets"}:
        keys = sorted(entry) if type(entry) is dict else type(entry).__name__
        raise FixtureFileError(f"has tensor {name!r} whose entry is {keys}, not exactly dtype, shape and data_offsets")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if type(dtype) is not str or dtype not in ITEMSIZE:
        raise FixtureFileError(f"has tensor {name!r} of dtype {str(dtype)[:40]!r}, not one of {', '.join(ITEMSIZE)}")
    if type(shape) is not list or not all(type(d) is int and 0 <= d < 2 ** 63 for d in shape):
        raise FixtureFileError(f"has tensor {name!r} of shape {str(shape)[:80]}: not a list of ints >= 0")
    if (type(offsets) is not list or len(offsets) != 2 or not all(type(o) is int for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]):
        raise FixtureFileError(f"has tensor {name!r} with data_offsets {str(offsets)[:80]}: not [begin, end] with "
                               "0 <= begin <= end")
    begin, end = offsets
    if end > buffer_size:
        raise FixtureFileError(f"has tensor {name!r} at data offsets [{begin}, {end}], past the end of its "
                               f"{buffer_size} data bytes (a truncated file or a lying header)")
    needed = prod(shape) * ITEMSIZE[dtype]
    if end - begin != needed:
        raise FixtureFileError(f"has tensor {name!r} of shape {shape} ({dtype}), which needs {needed} bytes, but its "
                               f"data offsets [{begin}, {end}] hold {end - begin}")
    return StoredTensor(name, dtype, tuple(shape), base + begin, base + end)


def read_data(path: Path, entry: StoredTensor) -> bytearray:
    """The entry's bytes, read into one buffer of exactly their size; FixtureFileError on a short read."""
    data = bytearray(entry.end - entry.start)
    view = memoryview(data)
    with _open(path) as handle:
        handle.seek(entry.start)
        got = 0
        while got < len(data):
            count = handle.readinto(view[got:])
            if not count:
                raise FixtureFileError(f"ended after {got} of the {len(data)} bytes of tensor {entry.name!r} "
                                       "(it shrank while read)")
            got += count
    return data


def _read_up_to(handle: Any, count: int) -> bytes:
    """Up to ``count`` bytes, fewer only at the end of the file."""
    chunks, left = [], count
    while left > 0:
        chunk = handle.read(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _open(path: Path) -> FileIO:
    """The file opened for reading in binary; a FIFO, a device or a folder is refused without being opened."""
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise FixtureFileError("is not a regular file")
        return open(path, "rb", buffering=0)  # noqa: SIM115 (the caller closes it)
    except OSError as exc:
        raise FixtureFileError(f"cannot be read: {exc.strerror or exc}") from None
