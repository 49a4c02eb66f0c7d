"""Tensors as plain values (docs/worker-protocol.md §7.4): `$tensor` tags whose elements travel as a
frame's buffers, little-endian, row-major. numpy (and ml_dtypes for bfloat16) are imported only when a tensor is met;
torch is never imported here: a torch.Tensor exists only where torch is loaded already, and is read through it.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any, NoReturn

from _vllm_gates.wire.channel import OutOfBand

# Wire dtype names (numpy's) and their sizes in bytes; bfloat16 is ml_dtypes.bfloat16, the top half of a float32.
ITEMSIZE = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
            "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
MAX_DIMS = 64
_MAX_DIM = 2 ** 63 - 1  # a dimension an int64 holds
_NUMPY_KINDS = {("b", 1): "bool", ("u", 1): "uint8", ("i", 1): "int8", ("i", 2): "int16", ("i", 4): "int32",
                ("i", 8): "int64", ("f", 2): "float16", ("f", 4): "float32", ("f", 8): "float64"}
_TORCH_NAMES = {f"torch.{name}": name for name in ITEMSIZE}
_SHOWN = 6  # elements a rendering shows
_CHUNK = 1 << 24  # bytes compared at a time: equality of two 1 GiB tensors needs no 1 GiB temporary

Refuse = Callable[[str], NoReturn]  # raises the caller's error (NotPlain, ProtocolError) at the value's path


@dataclass(frozen=True, eq=False)
class WireTensor(OutOfBand):
    """A tensor ready to send: its wire dtype and shape, and its elements' bytes (C order, little-endian), kept
    alive by ``owner`` (the contiguous array they belong to)."""

    dtype: str
    shape: tuple[int, ...]
    data: memoryview
    owner: Any = field(repr=False)

    def tag(self, index: int) -> dict[str, Any]:
        return {"$tensor": {"dtype": self.dtype, "shape": list(self.shape), "buffer": index}}


def carried(value: Any) -> bool:
    """Whether a value is an array the protocol carries as a tensor: exactly a numpy.ndarray, or a torch.Tensor."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and type(value) is numpy.ndarray:
        return True
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def is_array(value: Any) -> bool:
    """Whether a value is a numpy.ndarray (what a decoded `$tensor` is), without importing numpy."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray)


def _not_carried(dtype: Any) -> str:
    return f"of dtype {dtype}, which the protocol does not carry (it carries {', '.join(ITEMSIZE)})"


def wire_name(dtype: Any) -> str | None:
    """The wire name of a numpy dtype, None for one the protocol does not carry (complex, float8, uint16 ...)."""
    name = _NUMPY_KINDS.get((dtype.kind, dtype.itemsize))
    if name is not None:
        return name
    ml_dtypes = sys.modules.get("ml_dtypes")
    if dtype.name == "bfloat16" and ml_dtypes is not None and dtype == ml_dtypes.bfloat16:
        return "bfloat16"
    return None


def to_wire(value: Any, refuse: Refuse, cap: int, before: int = 0) -> WireTensor:
    """A numpy array or torch tensor as a WireTensor (``refuse``: dtype not carried, bytes past ``cap`` with the
    ``before`` bytes of the value's earlier tensors). A torch tensor is detached and copied to the CPU here."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and type(value) is numpy.ndarray:
        name = wire_name(value.dtype)
        if name is None:
            refuse(_not_carried(value.dtype))
        _check_size(value.nbytes, refuse, cap, before)
        return _wire(name, value.shape, value, refuse)
    return _torch_to_wire(value, refuse, cap, before)


def _check_size(nbytes: int, refuse: Refuse, cap: int, before: int) -> None:
    if before + nbytes > cap:
        earlier = f" (after {before} bytes of tensors before it)" if before else ""
        refuse(f"of {nbytes} bytes{earlier}, past the cap of {cap} bytes per message (max-tensor-bytes)")


def _torch_to_wire(tensor: Any, refuse: Refuse, cap: int, before: int) -> WireTensor:
    torch = sys.modules["torch"]
    name = _TORCH_NAMES.get(str(tensor.dtype))
    if name is None:
        refuse(_not_carried(tensor.dtype))
    if tensor.layout != torch.strided:
        refuse(f"with layout {tensor.layout}: only dense (strided) tensors are carried")
    if tensor.device.type == "meta":
        refuse("on device meta, which holds no data")
    _check_size(tensor.numel() * tensor.element_size(), refuse, cap, before)
    try:
        cpu = tensor.detach().to("cpu").resolve_conj().resolve_neg().contiguous()
        if name == "bfloat16":
            cpu = cpu.view(torch.int16)  # numpy has no bfloat16: the same 16 bits, as int16
        array = cpu.numpy()
    except Exception as exc:  # a tensor subclass or device that will not give its data
        refuse(f"whose data could not be copied to the CPU: {type(exc).__name__}: {exc}")
    return _wire(name, tuple(tensor.shape), array, refuse)


def _wire(name: str, shape: Sequence[int], array: Any, refuse: Refuse) -> WireTensor:
    numpy = sys.modules["numpy"]
    if len(shape) > MAX_DIMS:
        refuse(f"with {len(shape)} dimensions, past the limit of {MAX_DIMS}")
    order = array.dtype.byteorder
    if order == ">" or (order == "=" and sys.byteorder == "big"):
        array = array.astype(array.dtype.newbyteorder("<"))
    flat = numpy.ascontiguousarray(array).reshape(-1).view(numpy.uint8)
    if name == "bool" and flat.size and flat.max() > 1:  # a bool array viewed from other bytes: sent as 0 and 1
        flat = (flat != 0).view(numpy.uint8)
    return WireTensor(name, tuple(int(d) for d in shape), memoryview(flat), flat)


def numpy_dtype(name: str) -> Any:
    """The numpy dtype of a wire dtype name, little-endian (bfloat16: ml_dtypes.bfloat16)."""
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    import numpy

    return numpy.dtype(name).newbyteorder("<")


def _found(data: Any) -> str:
    names = {type(None): "null", bool: "a bool", int: "a number", float: "a number", str: "a string",
             list: "an array", dict: "an object"}
    return names.get(type(data), type(data).__name__)


def _shape_text(shape: Any) -> str:
    text = str(shape) if type(shape) is list else _found(shape)
    return text if len(text) <= 200 else text[:200] + " ...]"


def from_wire(body: Any, buffers: Sequence[bytearray], used: set[int], writable: bool, cap: int,
              refuse: Refuse) -> Any:
    """The numpy array a `$tensor` body and its frame's buffers give (read-only unless ``writable``); ``used``
    gathers the buffers taken. Every departure from the contract is refused, naming what was found."""
    if type(body) is not dict:
        refuse(f"$tensor of {_found(body)}, not an object")
    if set(body) != {"dtype", "shape", "buffer"}:
        keys = ", ".join(repr(k)[:40] for k in list(body)[:6])
        refuse(f"a $tensor with keys [{keys}], not exactly dtype, shape and buffer")
    dtype, shape, index = body["dtype"], body["shape"], body["buffer"]
    if type(dtype) is not str or dtype not in ITEMSIZE:
        refuse(f"a $tensor of dtype {str(dtype)[:60]!r}, which is not one of {', '.join(ITEMSIZE)}")
    if type(shape) is not list or not all(type(d) is int and d >= 0 for d in shape):
        refuse(f"a $tensor of shape {_shape_text(shape)}: a shape is a list of ints >= 0")
    if len(shape) > MAX_DIMS:
        refuse(f"a $tensor of shape {_shape_text(shape)}: {len(shape)} dimensions, past the limit of {MAX_DIMS}")
    if any(d > _MAX_DIM for d in shape):
        refuse(f"a $tensor of shape {_shape_text(shape)}: a dimension overflows a signed 64-bit int")
    nbytes = prod(shape) * ITEMSIZE[dtype]
    if nbytes > cap:
        refuse(f"a $tensor of shape {_shape_text(shape)} ({dtype}) needs {nbytes} bytes, past the cap of {cap} bytes "
               f"(max-tensor-bytes)")
    if not buffers:
        refuse("a $tensor, but the frame carries no buffers")
    if type(index) is not int or not 0 <= index < len(buffers):
        refuse(f"a $tensor of buffer {str(index)[:40]}, not an index below the frame's {len(buffers)} buffers")
    if index in used:
        refuse(f"a second $tensor of buffer {index}: each buffer belongs to exactly one $tensor")
    if len(buffers[index]) != nbytes:
        refuse(f"a $tensor of shape {_shape_text(shape)} ({dtype}) needs {nbytes} bytes, but buffer {index} holds "
               f"{len(buffers[index])}")
    used.add(index)
    import numpy

    array = numpy.frombuffer(buffers[index], dtype=numpy_dtype(dtype)).reshape(shape)
    if dtype == "bool":
        raw = numpy.frombuffer(buffers[index], dtype=numpy.uint8)
        if raw.size and raw.max() > 1:
            at = int(numpy.argmax(raw > 1))
            refuse(f"a bool $tensor whose element {at} is the byte {int(raw[at])}: bool elements are 0 or 1")
    array.flags.writeable = writable
    return array


def arrays_equal(actual: Any, expected: Any) -> bool:
    """Same dtype, same shape, same element bytes (bitwise: a NaN equals the same NaN bits, -0.0 is not 0.0);
    compared a chunk at a time, so no temporary as big as the arrays."""
    if actual is expected:
        return True
    if not (is_array(actual) and is_array(expected)):
        return False
    name = wire_name(actual.dtype) or str(actual.dtype)
    if name != (wire_name(expected.dtype) or str(expected.dtype)) or actual.shape != expected.shape:
        return False
    left, right = _little_bytes(actual), _little_bytes(expected)
    import numpy

    for start in range(0, left.size, _CHUNK):
        if not numpy.array_equal(left[start:start + _CHUNK], right[start:start + _CHUNK]):
            return False
    return True


def _little_bytes(array: Any) -> Any:
    """An array's elements as flat little-endian bytes (a view where the array is contiguous and little-endian)."""
    import numpy

    order = array.dtype.byteorder
    if order == ">" or (order == "=" and sys.byteorder == "big"):
        array = array.astype(array.dtype.newbyteorder("<"))
    flat = numpy.ascontiguousarray(array).reshape(-1)
    return flat.view(numpy.uint8) if flat.dtype.kind != "O" else numpy.frombuffer(flat.tobytes(), numpy.uint8)


def summary(array: Any) -> str:
    """A tensor in a report: dtype, shape and its first elements, in time that does not grow with its size."""
    name = wire_name(array.dtype) or str(array.dtype)
    count = array.size
    shown = [_element(x) for x in array.flat[:_SHOWN]] if count else []
    more = f", ... {count - _SHOWN} more" if count > _SHOWN else ""
    return f"tensor({name}, shape [{', '.join(map(str, array.shape))}], [{', '.join(shown)}{more}])"


def _element(item: Any) -> str:
    kind = getattr(getattr(item, "dtype", None), "kind", "")
    if kind == "b":
        return repr(bool(item))
    if kind in ("i", "u"):
        return repr(int(item))
    try:
        return repr(float(item))
    except (TypeError, ValueError):
        return repr(item)[:40]
