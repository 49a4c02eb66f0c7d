"""A reference's taps recorded in one `.safetensors` file (docs/divergence.md, "Recording a reference"): the taps
in forward order, and in the header's `__metadata__` the case's ids and the fingerprint of its weights, so a replay
on another machine is refused unless it is the same input on the same weights."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from _vllm_gates.errors import GatesError
from _vllm_gates.safetensors_file import CARRIED, METADATA, FixtureFileError, read_data, read_header, read_metadata
from _vllm_gates.tensors import numpy_dtype

FORMAT = "vllm-gates/taps/1"
STORED = {carried: stored for stored, carried in CARRIED.items()}  # numpy's dtype names -> the format's


class TapDumpError(GatesError):
    """A dump that cannot be written or replayed: unreadable, another format, or another input or weights."""


@dataclass(frozen=True)
class TapDump:
    """A replayed reference: its taps in forward order, the ids and weights fingerprint it was recorded on, and
    what recorded it."""

    taps: dict[str, Any]
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
    import numpy as np

    entries: dict[str, Any] = {}
    buffers, offset = [], 0
    for name, value in taps.items():
        array = np.ascontiguousarray(value)
        stored = STORED.get(array.dtype.name)
        if stored is None:
            raise TapDumpError(f"tap {name!r} has dtype {array.dtype.name}, which a dump cannot hold ({', '.join(STORED)})")
        data = array.tobytes()
        entries[name] = {"dtype": stored, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        buffers.append(data)
        offset += len(data)
    entries[METADATA] = {"format": FORMAT, "ids": json.dumps(list(ids_of(ids))), "weights_sha256": weights_fingerprint(weights),
                         "order": json.dumps(list(taps)), "source": source}
    header = json.dumps(entries).encode()
    header += b" " * (-len(header) % 8)
    folder = path.parent if str(path.parent) else Path(".")
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(len(header).to_bytes(8, "little") + header)
            for data in buffers:
                out.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_dump(path: Path) -> TapDump:
    """A dump's taps and what they were recorded on; TapDumpError naming the file and its problem."""
    import numpy as np

    try:
        metadata = read_metadata(path)
        entries = read_header(path)
        if metadata.get("format") != FORMAT:
            raise TapDumpError(f"{path}: not a tap dump (its metadata names format {metadata.get('format')!r}, not {FORMAT!r})")
        ids, order = json.loads(metadata["ids"]), json.loads(metadata["order"])
        if sorted(order) != sorted(entries):
            raise TapDumpError(f"{path}: its metadata orders the taps {order}, but it holds {sorted(entries)}")
        taps = {}
        for name in order:
            entry = entries[name]
            if entry.dtype not in CARRIED:
                raise TapDumpError(f"{path}: tap {name!r} has dtype {entry.dtype}, not one of {', '.join(CARRIED)}")
            array = np.frombuffer(read_data(path, entry), dtype=numpy_dtype(CARRIED[entry.dtype])).reshape(entry.shape)
            array.flags.writeable = False
            taps[name] = array
        return TapDump(taps, tuple(int(i) for i in ids), str(metadata["weights_sha256"]), str(metadata.get("source", "")))
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
