"""The tensor-parallel linear layers of vLLM 0.33.0 as one rank holds and runs them (spec/tensor-parallel.md TP-4.1 to
TP-4.4, TP-5.1, TP-5.2; vllm/model_executor/layers/linear.py).

Each layer is built from the unsharded checkpoint tensors (``[out, in]``) for one rank: it keeps the rank's slice, as
the shard plan of impl/distributed/shard_plan.py cuts it, and its ``forward`` runs on that rank, calling the
collectives of impl/distributed/communication_op.py on the default group.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from impl.distributed import communication_op
from impl.distributed.shard_plan import divide, kv_layout


def rank_rows(size: int, tp: int, rank: int, what: str) -> slice:
    """Rank ``rank``'s contiguous ``size / tp`` rows (or columns) (TP-4.1, TP-4.2); ValueError naming ``what``."""
    part = divide(size, tp, what)
    return slice(rank * part, (rank + 1) * part)


@dataclass(frozen=True)
class ColumnParallelLinear:
    """A column-parallel layer's rank: rows ``[r·out/tp, (r+1)·out/tp)`` of the weight and bias (TP-4.1)."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    gather_output: bool = False

    @classmethod
    def shard(cls, weight: torch.Tensor, bias: torch.Tensor | None, rank: int, tp: int,
              gather_output: bool = False) -> "ColumnParallelLinear":
        out = weight.shape[0]
        rows = rank_rows(out, tp, rank, f"out={out}")
        return cls(weight[rows], None if bias is None else bias[rows], gather_output)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The rank's output columns, or with gather_output every rank's, all-gathered in rank order (TP-5.1)."""
        out = F.linear(x, self.weight, self.bias)
        return communication_op.all_gather(out, dim=-1) if self.gather_output else out


@dataclass(frozen=True)
class RowParallelLinear:
    """A row-parallel layer's rank: columns ``[r·in/tp, (r+1)·in/tp)`` of the weight, the whole bias on rank 0 only
    (TP-4.2)."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    input_columns: slice

    @classmethod
    def shard(cls, weight: torch.Tensor, bias: torch.Tensor | None, rank: int, tp: int) -> "RowParallelLinear":
        columns_in = weight.shape[1]
        columns = rank_rows(columns_in, tp, rank, f"in={columns_in}")
        return cls(weight[:, columns], bias if rank == 0 else None, columns)

    def forward(self, x_parallel: torch.Tensor) -> torch.Tensor:
        """The rank's partial product (rank 0 adding the bias), all-reduced: the bias counted once (TP-5.2)."""
        return communication_op.all_reduce(F.linear(x_parallel, self.weight, self.bias))

    def forward_unsplit(self, x: torch.Tensor) -> torch.Tensor:
        """``forward`` on the rank's input columns of an unsplit ``x`` (vLLM's input_is_parallel=False)."""
        return self.forward(x[..., self.input_columns])


@dataclass(frozen=True)
class QKVParallelLinear:
    """The fused q/k/v layer's rank: its Hq/tp query heads and KV shard ``rank // replicas``, stacked q, k, v
    (TP-4.3)."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    q_size: int
    kv_size: int

    @classmethod
    def shard(cls, q_weight: torch.Tensor, k_weight: torch.Tensor, v_weight: torch.Tensor,
              biases: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None, num_heads: int, num_kv_heads: int,
              head_dim: int, rank: int, tp: int) -> "QKVParallelLinear":
        heads = divide(num_heads, tp, f"num_heads={num_heads}")
        kv_heads, replicas = kv_layout(num_heads, num_kv_heads, tp)
        q_rows = rank_rows(num_heads * head_dim, tp, rank, f"num_heads={num_heads}")
        kv_shard = rank // replicas
        kv_rows = slice(kv_shard * kv_heads * head_dim, (kv_shard + 1) * kv_heads * head_dim)
        rows = (q_rows, kv_rows, kv_rows)
        weight = torch.cat([part[r] for part, r in zip((q_weight, k_weight, v_weight), rows)])
        bias = None if biases is None else torch.cat([part[r] for part, r in zip(biases, rows)])
        return cls(weight, bias, heads * head_dim, kv_heads * head_dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The rank's q, k and v from its fused shard; no gather (TP-5.1)."""
        return F.linear(x, self.weight, self.bias).split([self.q_size, self.kv_size, self.kv_size], dim=-1)


@dataclass(frozen=True)
class MergedColumnParallelLinear:
    """gate_up_proj's rank: rows ``[r·f, (r+1)·f)`` of gate and of up, stacked gate then up, ``f = ffn/tp`` (TP-4.4)."""

    weight: torch.Tensor

    @classmethod
    def shard(cls, gate_weight: torch.Tensor, up_weight: torch.Tensor, rank: int, tp: int) -> "MergedColumnParallelLinear":
        ffn = gate_weight.shape[0]
        rows = rank_rows(ffn, tp, rank, f"ffn={ffn}")
        return cls(torch.cat([gate_weight[rows], up_weight[rows]]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The rank's [gate; up] columns, no gather (TP-5.1)."""
        return F.linear(x, self.weight)


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """silu(gate) · up over the two halves of the last dim, in the input's dtype (vLLM's SiluAndMul.forward_native)."""
    half = gate_up.shape[-1] // 2
    return F.silu(gate_up[..., :half]) * gate_up[..., half:]


@dataclass(frozen=True)
class ParallelMLP:
    """A decoder MLP's rank: gate_up merged column-parallel, down row-parallel without bias (TP-4.4, TP-4.2)."""

    gate_up: MergedColumnParallelLinear
    down: RowParallelLinear

    @classmethod
    def shard(cls, gate_weight: torch.Tensor, up_weight: torch.Tensor, down_weight: torch.Tensor, rank: int,
              tp: int) -> "ParallelMLP":
        return cls(MergedColumnParallelLinear.shard(gate_weight, up_weight, rank, tp),
                   RowParallelLinear.shard(down_weight, None, rank, tp))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """down(silu(gate) · up), the down partials all-reduced (TP-5.1, TP-5.2)."""
        return self.down.forward(silu_and_mul(self.gate_up.forward(x)))
