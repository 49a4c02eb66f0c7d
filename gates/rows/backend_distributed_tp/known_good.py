"""Known-good TP-W2 linear layers (spec/tensor-parallel.md TP-4.1, TP-4.2, TP-5.1, TP-5.2; docs/gate-files.md,
"Known-goods"): legitimate ports that sum in another order than the Python port, which the numeric gates must pass.

Each computes every rank's result in one process, as the ranks would (no gloo world): the sharding is the layer's,
the summation order is not the port's.

- ``column_linear_blocked``: each rank's output columns from a blocked matmul, the input dim accumulated in float32
  in blocks of 16 and the result rounded to x's dtype once (torch's CPU kernel sums in its own order).
- ``row_linear_reverse_reduce``: each rank's partial product in x's dtype (rank 0's with the bias), the partials
  all-reduced in reverse rank order, each running sum rounded to x's dtype, as a ring that starts at the last rank.
- ``row_linear_float32_reduce``: the partials kept in float32 and reduced there, rounded to x's dtype once (the
  port that operations.yaml says passes both row gates).

None imports the port or the oracle: the input checks are written here, with the messages operations.yaml names.
"""
from __future__ import annotations

from typing import Any

import torch

MAX_TP = 8  # the largest world the port starts; operations.yaml's tp range
FLOATS = {torch.float32: "float32", torch.bfloat16: "bfloat16"}
BLOCK = 16  # the blocked matmul's step along the input dim


def _shape(shape: Any) -> str:
    return "(" + ", ".join(str(int(side)) for side in shape) + ("," if len(shape) == 1 else "") + ")"


def _dtype(value: torch.Tensor) -> str:
    return str(value.dtype).removeprefix("torch.")


def _tensor(op: str, name: str, value: Any, shape: tuple[int, ...], dtype: torch.dtype | None) -> torch.Tensor:
    """``value`` as a tensor of ``shape`` and ``dtype`` (None: float32 or bfloat16), else the refusal naming both."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a tensor of shape {_shape(shape)}, got {type(value).__name__}")
    if dtype is None and value.dtype not in FLOATS:
        raise TypeError(f"{op}: {name} has dtype {_dtype(value)}; accepted: float32, bfloat16")
    if dtype is not None and value.dtype != dtype:
        raise TypeError(f"{op}: {name} has dtype {_dtype(value)}, expected {str(dtype).removeprefix('torch.')}")
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"{op}: {name} has shape {_shape(value.shape)}, expected {_shape(shape)}")
    return value


def _matrix(op: str, name: str, value: Any) -> torch.Tensor:
    if not isinstance(value, torch.Tensor) or value.dim() != 2:
        got = _shape(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise ValueError(f"{op}: {name} must be a 2-d tensor, got {got}")
    return _tensor(op, name, value, tuple(value.shape), None)


def _linear_inputs(op: str, x: Any, weight: Any, bias: Any, tp: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, int]:
    """x [tokens, in], weight [out, in], bias [out] or None, one dtype; tp in [1, MAX_TP]."""
    x = _matrix(op, "x", x)
    if isinstance(tp, bool) or not isinstance(tp, int):
        raise TypeError(f"{op}: tp must be an int in [1, {MAX_TP}], got {tp!r} ({type(tp).__name__})")
    if not 1 <= tp <= MAX_TP:
        raise ValueError(f"{op}: tp must be an int in [1, {MAX_TP}] (the largest gloo world this port starts), got {tp}")
    weight = _matrix(op, "weight", weight)
    _tensor(op, "weight", weight, (weight.shape[0], x.shape[1]), x.dtype)
    if bias is not None:
        _tensor(op, "bias", bias, (weight.shape[0],), x.dtype)
    return x, weight, bias, tp


def _divides(op: str, what: str, size: int, tp: int) -> None:
    if size % tp:
        raise ValueError(f"{op}: {what}={size} is not divisible by tp={tp}")


def _blocked(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x·weightᵀ (+ bias) summed along the input dim in float32, BLOCK columns at a time, rounded to x's dtype once."""
    total = torch.zeros(x.shape[0], weight.shape[0], dtype=torch.float32)
    for start in range(0, x.shape[1], BLOCK):
        total += x[:, start:start + BLOCK].float() @ weight[:, start:start + BLOCK].float().T
    if bias is not None:
        total += bias.float()
    return total.to(x.dtype)


def column_linear_blocked(x: Any, weight: Any, bias: Any, tp: Any, gather_output: Any = False) -> list[torch.Tensor]:
    """tp-column-linear: rank r's output columns [r·out/tp, (r+1)·out/tp) by a blocked float32 matmul, or with
    gather_output all of them on every rank (TP-4.1, TP-5.1)."""
    op = "tp-column-linear"
    x, weight, bias, tp = _linear_inputs(op, x, weight, bias, tp)
    if not isinstance(gather_output, bool):
        raise TypeError(f"{op}: gather_output must be a bool, got {gather_output!r}")
    _divides(op, "out", weight.shape[0], tp)
    rows = weight.shape[0] // tp
    parts = [_blocked(x, weight[r * rows:(r + 1) * rows], None if bias is None else bias[r * rows:(r + 1) * rows])
             for r in range(tp)]
    return [torch.cat(parts, dim=-1) for _ in range(tp)] if gather_output else parts


def _partials(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, tp: int, dtype: torch.dtype) -> list[torch.Tensor]:
    """Each rank's x[:, its columns]·weight[:, its columns]ᵀ, rank 0's with the bias, accumulated in float32 and
    rounded to ``dtype`` once (one rounding per partial, as a linear layer's kernel gives)."""
    columns = x.shape[1] // tp
    found = []
    for rank in range(tp):
        at = slice(rank * columns, (rank + 1) * columns)
        part = x[:, at].float() @ weight[:, at].float().T
        found.append((part + bias.float() if bias is not None and rank == 0 else part).to(dtype))
    return found


def row_linear_reverse_reduce(x: Any, weight: Any, bias: Any, tp: Any) -> list[torch.Tensor]:
    """tp-row-linear with the partials (in x's dtype) summed from the last rank to the first (TP-4.2, TP-5.2)."""
    x, weight, bias, tp = _linear_inputs("tp-row-linear", x, weight, bias, tp)
    _divides("tp-row-linear", "in", x.shape[1], tp)
    partials = _partials(x, weight, bias, tp, x.dtype)
    total = partials[-1]
    for part in reversed(partials[:-1]):
        total = total + part
    return [total.clone() for _ in range(tp)]


def row_linear_float32_reduce(x: Any, weight: Any, bias: Any, tp: Any) -> list[torch.Tensor]:
    """tp-row-linear with float32 partials reduced in float32 and rounded to x's dtype once (TP-4.2, TP-5.2)."""
    x, weight, bias, tp = _linear_inputs("tp-row-linear", x, weight, bias, tp)
    _divides("tp-row-linear", "in", x.shape[1], tp)
    total = torch.stack(_partials(x, weight, bias, tp, torch.float32)).sum(dim=0).to(x.dtype)
    return [total.clone() for _ in range(tp)]
