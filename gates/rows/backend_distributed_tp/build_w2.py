"""Builder of the TP-W2 layer operations' Python binding (operations.yaml): the case's tensors, made judge-side
(`{tensor: ...}` or a strategy's numpy arrays), as torch tensors of the same bits, inside maps too; every other
input as given.
The oracle takes the numpy arrays themselves (no builder)."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vllm_gates import Call, as_torch


def _torch(value: Any) -> Any:
    """``value`` with its numpy arrays (inside maps too: tp-layer-ranks' ``inputs``) turned into torch tensors."""
    if isinstance(value, np.ndarray):
        return as_torch(value)
    if isinstance(value, Mapping):
        return {name: _torch(inner) for name, inner in value.items()}
    return value


def torch_inputs(data: Mapping[str, Any]) -> Call:
    """The operation's keyword arguments, numpy arrays turned into torch tensors."""
    return Call(kwargs={name: _torch(value) for name, value in data.items()})
