"""Pickling for the gloo world's pipes (impl/distributed/gloo_world.py): plain pickle, except that a plain CPU tensor
travels as its storage's raw bytes instead of torch's own reduction, which runs torch.save once per storage (about
0.1 ms a tensor: most of a small layer call's cost, ci/bench/bench_tp_w2.py).

What arrives is what torch's pickling gives back: the dtype, shape, strides and storage offset of each tensor, and
views of one storage still sharing one storage (pickle's memo holds each storage once). Any other tensor (a subclass,
requires_grad, another device or layout, conjugate/negative bits, Python attributes) goes through torch's own
reduction unchanged. Read back with plain ``pickle.loads``.
"""
from __future__ import annotations

import io
import pickle
import sys
from typing import Any

PROTOCOL = 5
"""Pickle protocol 5: a storage's bytes are written once, as a buffer, with no intermediate copy."""


def dumps(value: Any) -> bytes:
    """``value`` pickled, plain CPU tensors by their storage's bytes; raises what ``pickle.dumps`` raises."""
    stream = io.BytesIO()
    _Pickler(stream, protocol=PROTOCOL).dump(value)
    return stream.getvalue()


class _Pickler(pickle.Pickler):
    """A pickler that reduces plain CPU tensors and their untyped storages itself (everything else as pickle does)."""

    def reducer_override(self, obj: Any) -> Any:
        torch = sys.modules.get("torch")  # a tensor exists only where torch is loaded already
        if torch is None:
            return NotImplemented
        if type(obj) is torch.Tensor and plain(obj):
            return _tensor, (obj.untyped_storage(), obj.dtype, obj.storage_offset(), tuple(obj.shape), obj.stride())
        if type(obj) is torch.UntypedStorage and obj.device.type == "cpu":
            as_bytes = torch.empty(0, dtype=torch.uint8).set_(obj)
            return _storage, (pickle.PickleBuffer(as_bytes.numpy()),)
        return NotImplemented


def plain(tensor: Any) -> bool:
    """Whether a torch.Tensor is one this module carries by its bytes: a dense CPU tensor with no autograd state,
    no conjugate/negative bit and no Python attributes (torch pickles those with more than its data)."""
    import torch

    return (tensor.device.type == "cpu" and tensor.layout == torch.strided and not tensor.is_nested
            and not tensor.is_quantized and not tensor.requires_grad and not tensor.is_conj() and not tensor.is_neg()
            and not tensor.__dict__)


def _storage(data: bytearray) -> Any:
    """A CPU untyped storage over ``data`` (the bytes pickle just read; no further copy)."""
    import torch

    if not data:
        return torch.UntypedStorage(0)
    return torch.frombuffer(data, dtype=torch.uint8).untyped_storage()


def _tensor(storage: Any, dtype: Any, offset: int, shape: tuple[int, ...], stride: tuple[int, ...]) -> Any:
    """The tensor of ``dtype`` viewing ``storage`` at ``offset`` with ``shape`` and ``stride``."""
    import torch

    return torch.empty(0, dtype=dtype).set_(storage, offset, shape, stride)
