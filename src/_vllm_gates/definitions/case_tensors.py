"""Tensors in a case's `input:` and `expect:` (docs/gate-files.md, "Tensors in cases"): a mapping
whose only key is `tensor`, holding a mapping, is a tensor, given inline (`dtype`, `shape`, `values`), by name from a
`.safetensors` file in the row's folder (`file`, `name`), or by a seeded generator (`randn`: `shape`, `dtype`, `seed`,
`scale`, `mean`) whose numbers are the same on every machine (numpy's PCG64 normal draws in float64, then cast). Each becomes a
read-only numpy array when the gate file loads, so it travels to the workers as a `$tensor`. Every bad spelling is a
definition error at the case's file:line naming the key and the value.
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from math import prod
from pathlib import Path
from typing import Any

from _vllm_gates.base.errors import Location
from _vllm_gates.base.fields import Reader, show, type_name
from _vllm_gates.base.yamlsource import YMap, location_of
from _vllm_gates.definitions.patterns import SKIPPED_FOLDERS
from _vllm_gates.definitions.safetensors_file import CARRIED, FixtureFileError, StoredTensor, read_data, read_header
from _vllm_gates.wire.channel import MAX_BUFFER_BYTES
from _vllm_gates.wire.tensors import FLOAT_DTYPES as FLOATS, ITEMSIZE, MAX_DIMS, numpy_dtype

TAG = "tensor"
RANDN_CHUNK = 1 << 20  # normal draws made at a time: a large generated tensor needs no float64 temporary of its size
_LISTED = 20  # names of a fixture file listed when the one asked for is missing
_INLINE_KEYS, _FILE_KEYS, _RANDN_KEYS = {"dtype", "shape", "values"}, {"file", "name"}, {"shape", "dtype", "seed"}

# a place in a case value, built only when a problem is reported: None is the top (`input`, `expect`), else
# (parent, step) where a step is a key of a mapping or an index of a list
Place = tuple[Any, Any] | None


class CaseTensors:
    """Reads the tensor spellings of one gate file's cases (its row folder ``row_dir``, shown as ``folder``);
    problems go to the file's ``reader``. A fixture file's header is read once per load."""

    def __init__(self, reader: Reader, row_dir: Path | None, folder: str):
        self.reader, self.row_dir, self.folder = reader, row_dir, folder
        self.headers: dict[Path, dict[str, StoredTensor] | None] = {}

    def value(self, value: Any, key: str, path: Place = None) -> Any:
        """``value`` as plain case data (yamlsource.to_plain), each tensor spelling in it a read-only numpy array;
        a spelling with a problem is None (the problem is the reader's)."""
        if isinstance(value, dict):
            if len(value) == 1 and TAG in value and isinstance(value[TAG], dict):
                return self.tensor(value, _key(key, path))
            return {k: self.value(v, key, (path, k)) if isinstance(v, (dict, list)) else v for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, key, (path, i)) if isinstance(v, (dict, list)) else v for i, v in enumerate(value)]
        return value

    def tensor(self, spelling: dict[str, Any], key: str) -> Any:
        """The array one spelling gives, or None after a problem."""
        body: YMap = spelling[TAG]
        key = f"{key}.{TAG}"
        if "values" in body:
            return self._inline(body, key) if self._checked_keys(body, key, _INLINE_KEYS, set()) else None
        if "file" in body or "name" in body:
            return self._from_file(body, key) if self._checked_keys(body, key, _FILE_KEYS, set()) else None
        if "randn" in body:
            return self._randn(body["randn"], body, f"{key}.randn") if self._checked_keys(body, key, {"randn"}, set()) else None
        self.reader.problem(location_of(spelling, TAG), key,
                            f"a tensor is given by `values` (with `dtype` and `shape`), by `file` and `name` (a "
                            f".safetensors file in the row's folder), or by `randn`; got keys [{', '.join(map(str, body))}]")
        return None

    def _checked_keys(self, body: YMap, key: str, required: set[str], optional: set[str]) -> bool:
        before = len(self.reader.problems)
        self.reader.keys(body, key, required, optional)
        return len(self.reader.problems) == before

    # the dtype and the shape ---------------------------------------------------------------------------------------

    def _dtype(self, body: YMap, key: str, allowed: Sequence[str] = tuple(ITEMSIZE)) -> str | None:
        dtype = body["dtype"]
        if type(dtype) is str and dtype in allowed:
            return dtype
        if type(dtype) is str and dtype in ITEMSIZE:
            why = f"dtype {show(dtype)} is not one a generator makes (it makes {', '.join(allowed)})"
        else:
            why = f"unknown dtype {show(dtype)} (known: {', '.join(allowed)})"
        self.reader.problem(location_of(body, "dtype"), f"{key}.dtype", why)
        return None

    def _shape(self, body: YMap, key: str, dtype: str | None) -> tuple[int, ...] | None:
        shape, where = body["shape"], location_of(body, "shape")
        if not isinstance(shape, list) or not all(type(d) is int for d in shape):
            self.reader.problem(where, f"{key}.shape", f"a shape is a list of whole numbers, got {type_name(shape)} "
                                                       f"{show(shape)}")
            return None
        if any(d < 0 for d in shape):
            self.reader.problem(where, f"{key}.shape", f"shape {show(shape)} has a negative dimension")
            return None
        if len(shape) > MAX_DIMS:
            self.reader.problem(where, f"{key}.shape", f"shape {show(shape)} has {len(shape)} dimensions, past the limit "
                                                       f"of {MAX_DIMS}")
            return None
        nbytes = prod(shape) * ITEMSIZE.get(dtype or "", 1)
        if nbytes > MAX_BUFFER_BYTES:
            self.reader.problem(where, f"{key}.shape", f"shape {show(shape)} of {dtype or 'its dtype'} needs {nbytes} "
                                                       f"bytes, past the {MAX_BUFFER_BYTES} a tensor may hold")
            return None
        return tuple(shape)

    # inline values ------------------------------------------------------------------------------------------------

    def _inline(self, body: YMap, key: str) -> Any:
        dtype = self._dtype(body, key)
        shape = self._shape(body, key, dtype)
        if dtype is None or shape is None:
            return None
        values, where = body["values"], location_of(body, "values")
        flat = _by_shape(values, shape)
        if flat is None:
            found = _scalars(values)
            self.reader.problem(where, f"{key}.values",
                                f"values hold {len(found)} number{'' if len(found) == 1 else 's'}, but shape {list(shape)} needs {prod(shape)}" if
                                len(found) != prod(shape) else
                                f"values {show(values)} are nested as no shape is: give them nested by shape "
                                f"{list(shape)} or as one flat list")
            return None
        for index, item in enumerate(flat):
            why = _refused_element(item, dtype)
            if why:
                self.reader.problem(where, f"{key}.values", f"element {index} ({show(item)}) {why}")
                return None
        import numpy

        if dtype in FLOATS:
            wide = numpy.array(flat, dtype=numpy.float64)
            wide[numpy.isnan(wide)] = math.nan  # `.nan` is the quiet NaN (PyYAML's own has its sign bit set)
            with numpy.errstate(over="ignore"):  # an overflow is refused just below
                array = wide.astype(numpy_dtype(dtype))
            overflow = numpy.isinf(array.astype(numpy.float64)) & numpy.isfinite(wide)
            if overflow.any():
                at = int(numpy.argmax(overflow))
                self.reader.problem(where, f"{key}.values", f"element {at} ({show(flat[at])}) is beyond the largest "
                                                            f"finite {dtype} ({_largest(dtype)})")
                return None
        else:
            array = numpy.array(flat, dtype=numpy_dtype(dtype))
        return _read_only(array.reshape(shape))

    # a fixture file ------------------------------------------------------------------------------------------------

    def _from_file(self, body: YMap, key: str) -> Any:
        file, name = body["file"], body["name"]
        file_where, name_where = location_of(body, "file"), location_of(body, "name")
        if not isinstance(name, str) or not name:
            self.reader.problem(name_where, f"{key}.name", f"expected a tensor's name, got {type_name(name)} {show(name)}")
            return None
        path, shown = self._fixture_path(file, file_where, f"{key}.file")
        if path is None:
            return None
        header = self._header(path, shown, file_where, f"{key}.file")
        if header is None:
            return None
        entry = header.get(name)
        if entry is None:
            names = sorted(header)
            listed = ", ".join(names[:_LISTED]) + (f" and {len(names) - _LISTED} more" if len(names) > _LISTED else "")
            self.reader.problem(name_where, f"{key}.name", f"{shown} has no tensor {show(name)} (it holds: "
                                                           f"{listed or 'no tensor'})")
            return None
        dtype = CARRIED.get(entry.dtype)
        if dtype is None:
            self.reader.problem(name_where, f"{key}.name", f"tensor {show(name)} of {shown} is {entry.dtype}, a dtype the "
                                                           f"protocol does not carry (it carries {', '.join(CARRIED)})")
            return None
        if entry.end - entry.start > MAX_BUFFER_BYTES:
            self.reader.problem(name_where, f"{key}.name", f"tensor {show(name)} of {shown} is {entry.end - entry.start} "
                                                           f"bytes, past the {MAX_BUFFER_BYTES} a tensor may hold")
            return None
        try:
            data = read_data(path, entry)
        except FixtureFileError as error:
            self.reader.problem(file_where, f"{key}.file", f"fixture file {shown} {error}")
            return None
        import numpy

        array = numpy.frombuffer(data, dtype=numpy_dtype(dtype)).reshape(entry.shape)
        raw = numpy.frombuffer(data, dtype=numpy.uint8)
        if dtype == "bool" and raw.size and raw.max() > 1:
            at = int(numpy.argmax(raw > 1))
            self.reader.problem(name_where, f"{key}.name", f"tensor {show(name)} of {shown} is BOOL, but its element {at} "
                                                           f"is the byte {raw[at]}: bool elements are 0 or 1")
            return None
        return _read_only(array)

    def _fixture_path(self, file: Any, where: Location | None, key: str) -> tuple[Path | None, str]:
        """The fixture file under the row's folder and its project-relative name; (None, "") after a problem."""
        if not isinstance(file, str) or not file:
            self.reader.problem(where, key, f"expected a file name relative to the row's folder, got {type_name(file)} "
                                            f"{show(file)}")
            return None, ""
        parts = file.replace("\\", "/").split("/")
        shown = f"{self.folder}/{file}" if self.folder else file
        why = ("is an absolute path" if file.startswith("/") or os.path.isabs(file) else
               "has a '..' part" if ".." in parts else
               f"lies in a {next(p for p in parts if p in SKIPPED_FOLDERS)} folder, which fingerprints never read"
               if SKIPPED_FOLDERS.intersection(parts) else
               "is not a .safetensors file" if not file.endswith(".safetensors") else
               "cannot be read: the gate file has no row folder" if self.row_dir is None else "")
        if why:
            self.reader.problem(where, key, f"fixture file {show(file)} {why}: a fixture is a .safetensors file inside "
                                            f"the row's folder (e.g. fixtures/x.safetensors)")
            return None, ""
        assert self.row_dir is not None
        path = self.row_dir.joinpath(*[p for p in parts if p not in ("", ".")])
        step = self.row_dir
        for part in [p for p in parts if p not in ("", ".")]:
            step = step / part
            if step.is_symlink():
                self.reader.problem(where, key, f"fixture file {show(shown)} is reached through the symlink "
                                                f"{show(step.relative_to(self.row_dir).as_posix())}: the row's fingerprint "
                                                "covers only files inside its folder")
                return None, ""
        if not path.exists():
            self.reader.problem(where, key, f"fixture file {show(shown)} does not exist")
            return None, ""
        return path, shown

    def _header(self, path: Path, shown: str, where: Location | None, key: str) -> dict[str, StoredTensor] | None:
        if path not in self.headers:
            try:
                self.headers[path] = read_header(path)
            except FixtureFileError as error:
                self.headers[path] = None
                self.reader.problem(where, key, f"fixture file {shown} {error}")
                return None
        return self.headers[path]

    # a seeded generator --------------------------------------------------------------------------------------------

    def _randn(self, spec: Any, body: YMap, key: str) -> Any:
        if not isinstance(spec, YMap):
            self.reader.problem(location_of(body, "randn"), key, f"expected a mapping of shape, dtype, seed, scale and mean, "
                                                                 f"got {type_name(spec)} {show(spec)}")
            return None
        if not self._checked_keys(spec, key, _RANDN_KEYS, {"scale", "mean"}):
            return None
        dtype = self._dtype(spec, key, FLOATS)
        shape = self._shape(spec, key, dtype)
        seed, scale, mean = spec["seed"], spec.get("scale", 1.0), spec.get("mean", 0.0)
        if type(seed) is not int or not 0 <= seed < 2 ** 128:
            self.reader.problem(location_of(spec, "seed"), f"{key}.seed", f"a seed is a whole number from 0 to 2**128 - 1, "
                                                                          f"got {type_name(seed)} {show(seed)}")
            return None
        if type(scale) not in (int, float) or not math.isfinite(scale):
            self.reader.problem(location_of(spec, "scale"), f"{key}.scale", f"a scale is a finite number, got "
                                                                            f"{type_name(scale)} {show(scale)}")
            return None
        if type(mean) not in (int, float) or not math.isfinite(mean):
            self.reader.problem(location_of(spec, "mean"), f"{key}.mean", f"a mean is a finite number, got "
                                                                          f"{type_name(mean)} {show(mean)}")
            return None
        if dtype is None or shape is None:
            return None
        array = randn(shape, dtype, seed, float(scale), float(mean))
        if array is None:
            at, made_by = ("mean", f"mean {show(mean)} with scale {show(scale)}") if "mean" in spec else \
                ("scale", f"scale {show(scale)}")
            self.reader.problem(location_of(spec, at), f"{key}.{at}", f"{made_by} makes draws beyond the largest finite "
                                                                      f"{dtype} ({_largest(dtype)})")
        return array


def randn(shape: tuple[int, ...], dtype: str, seed: int, scale: float = 1.0, mean: float = 0.0) -> Any:
    """Standard normal draws of numpy's Generator(PCG64(seed)) in float64, times ``scale``, plus ``mean``, cast to
    ``dtype``, read-only; None where a draw overflows the dtype. Made RANDN_CHUNK draws at a time (the same stream)."""
    import numpy

    generator = numpy.random.Generator(numpy.random.PCG64(seed))
    out = numpy.empty(prod(shape), dtype=numpy_dtype(dtype))
    for start in range(0, out.size, RANDN_CHUNK):
        wide = generator.standard_normal(min(RANDN_CHUNK, out.size - start)) * scale + mean
        with numpy.errstate(over="ignore"):  # an overflow is refused just below
            part = wide.astype(out.dtype)
        if not numpy.isfinite(part.astype(numpy.float64)).all():
            return None
        out[start:start + part.size] = part
    return _read_only(out.reshape(shape))


def _key(key: str, path: Place) -> str:
    steps = []
    while path is not None:
        path, step = path
        steps.append(f"[{step}]" if type(step) is int else f".{step}")
    return key + "".join(reversed(steps))


def _scalars(values: Any) -> list[Any]:
    if isinstance(values, list):
        return [x for item in values for x in _scalars(item)]
    return [values]


def _by_shape(values: Any, shape: tuple[int, ...]) -> list[Any] | None:
    """The values in row-major order when nested exactly by ``shape`` (a 0-d tensor: one value alone), or a flat
    list of as many as it holds; None otherwise."""
    nested = _nested(values, shape)
    if nested is not None:
        return nested
    if isinstance(values, list) and len(shape) > 1 and len(values) == prod(shape) and \
            not any(isinstance(v, (list, dict)) for v in values):
        return list(values)
    return None


def _nested(values: Any, shape: tuple[int, ...]) -> list[Any] | None:
    if not shape:
        return None if isinstance(values, (list, dict)) else [values]
    if not isinstance(values, list) or len(values) != shape[0]:
        return None
    flat: list[Any] = []
    for item in values:
        inner = _nested(item, shape[1:])
        if inner is None:
            return None
        flat.extend(inner)
    return flat


def _refused_element(item: Any, dtype: str) -> str:
    """Why an inline value cannot be an element of ``dtype`` ("" when it can)."""
    if dtype == "bool":
        return "" if type(item) is bool else f"is {type_name(item)}, but a bool tensor holds true or false"
    if type(item) not in (int, float):
        return f"is {type_name(item)}, not a number{_number_hint(item)}"
    if dtype in FLOATS:
        return ""
    if type(item) is float:
        return f"is a float, but a {dtype} tensor holds whole numbers"
    bits = 8 * ITEMSIZE[dtype]
    low, high = (0, 2 ** bits - 1) if dtype.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return "" if low <= item <= high else f"is outside {dtype}'s range [{low}, {high}]"


def _number_hint(item: Any) -> str:
    """For text that Python reads as a number: how to write it so that YAML does too."""
    try:
        float(item) if type(item) is str else None
    except ValueError:
        return ""
    return " (YAML reads a number with an exponent as a number only with a dot and a signed exponent: write " \
           "1.0e+6, 1.0e-5)" if type(item) is str else ""


def _largest(dtype: str) -> str:
    import ml_dtypes
    import numpy

    info = ml_dtypes.finfo(ml_dtypes.bfloat16) if dtype == "bfloat16" else numpy.finfo(dtype)
    return repr(float(info.max))


def _read_only(array: Any) -> Any:
    array.flags.writeable = False
    return array

