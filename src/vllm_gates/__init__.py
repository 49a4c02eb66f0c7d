"""vllm-gates: gate roadmap rows of a vLLM port; an implementation checked against independent oracles.

The public API is what gate content needs: ``Call``, which a gate's builder returns, ``settings()``, the
settings of the implementation under gate (e.g. the header and library paths it is judged with), ``as_torch``,
which turns a tensor input (a numpy array in the worker) into a torch tensor, and ``strategies``, Hypothesis strategies
of tensors for a gate's strategy module (imported when first used). Everything else lives in
the private package ``_vllm_gates`` and may change; the command is ``gates`` and the pytest plugin loads itself.
"""
from __future__ import annotations

from typing import Any

from _vllm_gates.wire.call import Call
from _vllm_gates.wire.settings import current as settings

__all__ = ["Call", "settings", "as_torch", "strategies", "__version__"]
__version__ = "0.2.0"


def __getattr__(name: str) -> Any:
    """``vllm_gates.strategies``, imported on first use: a worker that never draws tensors never imports hypothesis."""
    if name == "strategies":
        import importlib

        return importlib.import_module("vllm_gates.strategies")
    raise AttributeError(f"module 'vllm_gates' has no attribute {name!r}")


def as_torch(array: Any) -> Any:
    """A torch tensor of a tensor input (a numpy.ndarray, as a worker decodes `$tensor`; docs/worker-protocol.md §7.4):
    same dtype, shape and element bits, bfloat16 (ml_dtypes) included; sharing the array's memory where it is
    writable, native-endian and C-ordered, else a copy. TypeError, naming what it got, for anything else."""
    import sys

    numpy = sys.modules.get("numpy")
    if numpy is None or type(array) is not numpy.ndarray:
        raise TypeError(f"as_torch takes a numpy.ndarray (a tensor input), got {type(array).__module__}.{type(array).__qualname__}")
    import torch

    bfloat16 = array.dtype.name == "bfloat16" and array.dtype.itemsize == 2 and array.dtype.kind == "V"
    if array.dtype.kind not in "biuf" and not bfloat16:
        raise TypeError(f"as_torch takes a tensor of a dtype the protocol carries, got {array.dtype}")
    if not (array.flags.writeable and array.flags.c_contiguous and array.dtype.isnative):
        array = array.astype(array.dtype.newbyteorder("="), order="C", copy=True)
    if bfloat16:
        return torch.from_numpy(array.view(numpy.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)
