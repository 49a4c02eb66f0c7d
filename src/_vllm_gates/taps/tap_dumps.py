"""A reference's taps recorded in one `.safetensors` file (docs/divergence.md, "Recording a reference"): the taps
in forward order, and in the header's `__metadata__` the case's ids and the fingerprint of its weights, so a replay
on another machine is refused unless it is the same input on the same weights."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _vllm_gates.base.errors import GatesError
from _vllm_gates.definitions.safetensors_file import CARRIED, METADATA, FixtureFileError, StoredTensor, read_data, read_header, read_metadata
from _vllm_gates.wire.tensors import numpy_dtype

FORMAT = "vllm-gates/taps/1"
STORED = {carried: stored for stored, carried in CARRIED.items()}  # numpy's dtype names -> the format's


class TapDumpError(GatesError):
    """A dump that cannot be written or replayed: unreadable, another format, or another input or weights."""


@dataclass(frozen=True)
class TapDump:
    """A replayed reference: its taps in forward order, the ids and weights fingerprint it was recorded on, and
    what recorded it."""

    taps: TapFile
    ids: tuple[int, ...]
    fingerprint: str
    source: str


def weights_fingerprint(weights: Mapping[str, Any]) -> str:
    """sha256 over the weights' sorted names, each with its dtype, shape and little-endian row-major bytes."""
    import numpy as np

    digest = hashlib.sha256()
    for name in sorted(weights):
        array = np.asarray(weights[name])
        header = json.dumps([name, array.dtype.name, list(array.shape)])
        digest.update(len(header).to_bytes(8, "little") + header.encode())
        data = np.ascontiguousarray(array)
        data = data.astype(data.dtype.newbyteorder("<"), copy=False) if data.dtype.byteorder == ">" else data
        digest.update(data.tobytes())
    return digest.hexdigest()


def ids_of(ids: Any) -> tuple[int, ...]:
    """The case's token ids as a tuple of ints."""
    import numpy as np

    return tuple(int(i) for i in np.asarray(ids).reshape(-1))


def write_dump(path: Path, taps: Mapping[str, Any], ids: Any, weights: Mapping[str, Any], source: str) -> None:
    """The taps (forward order) written to ``path`` atomically, with the ids, the weights' fingerprint, the order and
    ``source`` (what recorded them) in the header's metadata."""
    write_taps(path, taps, {"ids": json.dumps(list(ids_of(ids))), "weights_sha256": weights_fingerprint(weights),
                            "source": source})


def write_taps(path: Path, taps: Mapping[str, Any], metadata: Mapping[str, str]) -> None:
    """The taps (forward order) written to ``path`` atomically with ``metadata``, the format and the order in the
    header; each tap written from its own memory, one at a time, so that a lazy ``taps`` (a TapFile) is never held
    whole and no tap is copied to bytes first."""
    entries: dict[str, Any] = {}
    offset = 0
    for name in taps:  # the header first: every tap's dtype and shape
        entries[name] = _entry(name, taps[name], offset)
        offset = entries[name]["data_offsets"][1]
    entries[METADATA] = {**metadata, "format": FORMAT, "order": json.dumps(list(taps))}
    header = json.dumps(entries).encode()
    header += b" " * (-len(header) % 8)
    folder = path.parent if str(path.parent) else Path(".")
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(len(header).to_bytes(8, "little") + header)
            for name in taps:
                _write_tap(out, taps[name])
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _entry(name: str, array: Any, offset: int) -> dict[str, Any]:
    """The header entry of ``array`` stored at ``offset``; TapDumpError for a dtype the format cannot hold."""
    stored = STORED.get(array.dtype.name)
    if stored is None:
        raise TapDumpError(f"tap {name!r} has dtype {array.dtype.name}, which a dump cannot hold ({', '.join(STORED)})")
    return {"dtype": stored, "shape": list(array.shape), "data_offsets": [offset, offset + int(array.nbytes)]}


def _write_tap(out: Any, array: Any) -> None:
    """``array``'s bytes, row-major little-endian, written from its own memory where it is already so."""
    import numpy as np

    data = np.ascontiguousarray(array)
    if data.dtype.byteorder == ">":
        data = data.astype(data.dtype.newbyteorder("<"))
    out.write(memoryview(data.reshape(-1).view(np.uint8)))  # type: ignore[arg-type]  # an ndarray is a buffer; numpy's stubs say so from Python 3.12


class TapFile(Mapping[str, Any]):
    """The taps of a tap file, in its order, each read from the file when asked for (a fresh read-only array): only
    the taps in use are in memory (docs/divergence.md, "What it runs")."""

    def __init__(self, path: Path, entries: Mapping[str, StoredTensor], order: tuple[str, ...]) -> None:
        self.path, self._entries, self._order = path, dict(entries), order

    def __getitem__(self, name: str) -> Any:
        import numpy as np

        entry = self._entries[name]
        try:
            data = read_data(self.path, entry)
        except (OSError, FixtureFileError) as error:
            raise TapDumpError(f"{self.path}: tap {name!r} could not be read: {error}") from None
        array = np.frombuffer(data, dtype=numpy_dtype(CARRIED[entry.dtype])).reshape(entry.shape)
        array.flags.writeable = False
        return array

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)


def spill(taps: Mapping[str, Any], path: Path) -> TapFile:
    """``taps`` written to ``path`` and opened as a TapFile: what a side answered, held on disk while the judge waits
    for the next side and judges tap by tap (docs/divergence.md)."""
    try:
        write_taps(path, taps, {})
    except OSError as error:
        raise TapDumpError(f"the taps could not be held on disk at {path}: {error}") from None
    return _opened(path)[0]


def read_dump(path: Path) -> TapDump:
    """A dump's taps (read when used) and what they were recorded on; TapDumpError naming the file and its problem."""
    taps, metadata = _opened(path)
    try:
        ids = json.loads(metadata["ids"])
        return TapDump(taps, tuple(int(i) for i in ids), str(metadata["weights_sha256"]), str(metadata.get("source", "")))
    except (KeyError, ValueError, TypeError) as error:
        raise TapDumpError(f"{path}: its metadata is not a tap dump's ({type(error).__name__}: {error})") from None


def _opened(path: Path) -> tuple[TapFile, dict[str, str]]:
    """A tap file's taps and its metadata, its format, order and dtypes checked; TapDumpError naming the file."""
    try:
        metadata = read_metadata(path)
        entries = read_header(path)
        if metadata.get("format") != FORMAT:
            raise TapDumpError(f"{path}: not a tap dump (its metadata names format {metadata.get('format')!r}, not {FORMAT!r})")
        order = json.loads(metadata["order"])
        if not isinstance(order, list) or sorted(order) != sorted(entries):
            raise TapDumpError(f"{path}: its metadata orders the taps {order}, but it holds {sorted(entries)}")
        for name in order:
            if entries[name].dtype not in CARRIED:
                raise TapDumpError(f"{path}: tap {name!r} has dtype {entries[name].dtype}, not one of {', '.join(CARRIED)}")
        return TapFile(path, entries, tuple(order)), metadata
    except FixtureFileError as error:
        raise TapDumpError(f"{path}: {error}") from None
    except (KeyError, ValueError, TypeError) as error:
        raise TapDumpError(f"{path}: its metadata is not a tap dump's ({type(error).__name__}: {error})") from None


def check_dump(dump: TapDump, ids: Any, weights: Mapping[str, Any], where: str) -> None:
    """Refuse a dump recorded on other ids or other weights than the case's, naming both values."""
    case_ids = ids_of(ids)
    if dump.ids != case_ids:
        raise TapDumpError(f"{where}: the dump was recorded on ids {list(dump.ids)}, the case has ids {list(case_ids)}")
    fingerprint = weights_fingerprint(weights)
    if dump.fingerprint != fingerprint:
        raise TapDumpError(f"{where}: the dump was recorded on weights with sha256 {dump.fingerprint}, the case's weights "
                           f"have sha256 {fingerprint}")
