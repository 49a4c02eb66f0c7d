"""The tensor-parallel linear layers of vLLM 0.33.0 as one rank holds and runs them (spec/tensor-parallel.md TP-4.1 to
TP-4.4, TP-5.1, TP-5.2; vllm/model_executor/layers/linear.py).

Each layer is built from the unsharded checkpoint tensors (``[out, in]``) for one rank: the shard plan's function for
its kind (impl/distributed/shard_plan.py) says which rows and columns the rank holds, and the layer keeps that
``WeightShard`` beside the slice it cut. ``partial`` is the rank's output before its collective, ``collective`` runs
the collective of impl/distributed/communication_op.py on the default group, ``forward`` is the one after the other.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from impl.distributed import communication_op
from impl.distributed.shard_plan import (HeadLayout, Span, WeightShard, block, column_shard, head_layout,
                                         merged_column_shard, qkv_shard, row_shard)


def rank_rows(size: int, tp: int, rank: int, what: str) -> slice:
    """Rank ``rank``'s contiguous ``size / tp`` rows (or columns) as a slice (the shard plan's ``block``, TP-4.1,
    TP-4.2); ValueError naming ``what``."""
    return _slice(block(size, tp, rank, what))


def _slice(span: Span) -> slice:
    return slice(span[0], span[1])


def cut(shard: WeightShard, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """The rank's weight: each part's rows and columns of its source tensor, stacked along the rows, then the shard's
    zero padding rows (TP-4.1 to TP-4.6)."""
    pieces = [tensors[part.source][_slice(part.rows), _slice(part.cols)] for part in shard.parts]
    if shard.padding_rows:
        pieces.append(pieces[0].new_zeros((shard.padding_rows, pieces[0].shape[1])))
    weight = torch.cat(pieces, dim=0).contiguous()
    if tuple(weight.shape) != shard.shape:
        raise AssertionError(f"{shard.name}: cut to {tuple(weight.shape)}, the shard plan says {shard.shape}")
    return weight


def cut_bias(shard: WeightShard, biases: dict[str, torch.Tensor]) -> torch.Tensor:
    """A column-parallel rank's bias: each weight part's rows of its bias (``biases`` keyed by the weight's source),
    stacked as the weight's (TP-4.1, TP-4.3)."""
    return torch.cat([biases[part.source][_slice(part.rows)] for part in shard.parts]).contiguous()


@dataclass(frozen=True)
class ColumnParallelLinear:
    """A column-parallel layer's rank: rows ``[r·out/tp, (r+1)·out/tp)`` of the weight and bias (TP-4.1)."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    weight_shard: WeightShard
    gather_output: bool = False

    @classmethod
    def shard(cls, weight: torch.Tensor, bias: torch.Tensor | None, rank: int, tp: int,
              gather_output: bool = False) -> "ColumnParallelLinear":
        plan = column_shard("weight", "weight", weight.shape[0], weight.shape[1], tp, rank)
        held = None if bias is None else cut_bias(plan, {"weight": bias})
        return cls(cut(plan, {"weight": weight}), held, plan, gather_output)

    def partial(self, x: torch.Tensor) -> torch.Tensor:
        """The rank's output columns [tokens, out/tp], before any gather (TP-5.1)."""
        return F.linear(x, self.weight, self.bias)

    def collective(self, partial: torch.Tensor) -> torch.Tensor:
        """With gather_output every rank's columns, all-gathered in rank order; else the rank's own (TP-5.1)."""
        return communication_op.all_gather(partial, dim=-1) if self.gather_output else partial

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.collective(self.partial(x))


@dataclass(frozen=True)
class RowParallelLinear:
    """A row-parallel layer's rank: columns ``[r·in/tp, (r+1)·in/tp)`` of the weight, the whole bias on rank 0 only
    (TP-4.2)."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    weight_shard: WeightShard

    @classmethod
    def shard(cls, weight: torch.Tensor, bias: torch.Tensor | None, rank: int, tp: int, name: str = "weight",
              source: str = "weight", size_name: str = "in") -> "RowParallelLinear":
        """Rank ``rank``'s columns of ``weight``, the plan's weight ``name`` read from input ``source``."""
        plan = row_shard(name, source, weight.shape[0], weight.shape[1], tp, rank, size_name=size_name)
        held = None if bias is None or plan.bias is None else bias[_slice(plan.bias)].contiguous()
        return cls(cut(plan, {source: weight}), held, plan)

    @property
    def input_columns(self) -> slice:
        """The columns of an unsplit input the rank multiplies: its weight's columns (TP-4.2)."""
        return _slice(self.weight_shard.parts[0].cols)

    def partial(self, x_parallel: torch.Tensor) -> torch.Tensor:
        """The rank's partial product [tokens, out], rank 0 adding the bias (TP-4.2)."""
        return F.linear(x_parallel, self.weight, self.bias)

    def collective(self, partial: torch.Tensor) -> torch.Tensor:
        """The ranks' partials all-reduced: the bias counted once (TP-5.2)."""
        return communication_op.all_reduce(partial)

    def forward(self, x_parallel: torch.Tensor) -> torch.Tensor:
        return self.collective(self.partial(x_parallel))

    def partial_unsplit(self, x: torch.Tensor) -> torch.Tensor:
        """``partial`` on the rank's input columns of an unsplit ``x`` (vLLM's input_is_parallel=False)."""
        return self.partial(x[..., self.input_columns])

    def forward_unsplit(self, x: torch.Tensor) -> torch.Tensor:
        return self.collective(self.partial_unsplit(x))


@dataclass(frozen=True)
class QKVParallelLinear:
    """The fused q/k/v layer's rank: its Hq/tp query heads and KV shard ``rank // replicas``, stacked q, k, v
    (TP-4.3)."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    weight_shard: WeightShard
    heads: HeadLayout
    head_dim: int

    @classmethod
    def shard(cls, q_weight: torch.Tensor, k_weight: torch.Tensor, v_weight: torch.Tensor,
              biases: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None, num_heads: int, num_kv_heads: int,
              head_dim: int, rank: int, tp: int) -> "QKVParallelLinear":
        sources = ("q_weight", "k_weight", "v_weight")
        plan = qkv_shard("qkv", sources, q_weight.shape[1], num_heads, num_kv_heads, head_dim, tp, rank)
        weight = cut(plan, dict(zip(sources, (q_weight, k_weight, v_weight))))
        bias = None if biases is None else cut_bias(plan, dict(zip(sources, biases)))
        return cls(weight, bias, plan, head_layout(num_heads, num_kv_heads, tp), head_dim)

    @property
    def q_size(self) -> int:
        return self.weight_shard.parts[0].rows[1] - self.weight_shard.parts[0].rows[0]

    @property
    def kv_size(self) -> int:
        return self.weight_shard.parts[1].rows[1] - self.weight_shard.parts[1].rows[0]

    def partial(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The rank's q, k and v from its fused shard (TP-5.1)."""
        return F.linear(x, self.weight, self.bias).split([self.q_size, self.kv_size, self.kv_size], dim=-1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``partial``: QKV gathers nothing (TP-5.1)."""
        return self.partial(x)


@dataclass(frozen=True)
class MergedColumnParallelLinear:
    """gate_up_proj's rank: rows ``[r·f, (r+1)·f)`` of gate and of up, stacked gate then up, ``f = ffn/tp`` (TP-4.4)."""

    weight: torch.Tensor
    weight_shard: WeightShard

    @classmethod
    def shard(cls, gate_weight: torch.Tensor, up_weight: torch.Tensor, rank: int, tp: int) -> "MergedColumnParallelLinear":
        sources = ("gate_weight", "up_weight")
        plan = merged_column_shard("gate_up", sources, gate_weight.shape[0], gate_weight.shape[1], tp, rank)
        return cls(cut(plan, dict(zip(sources, (gate_weight, up_weight)))), plan)

    def partial(self, x: torch.Tensor) -> torch.Tensor:
        """The rank's [gate; up] columns [tokens, 2·ffn/tp] (TP-5.1)."""
        return F.linear(x, self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``partial``: gate_up gathers nothing (TP-5.1)."""
        return self.partial(x)


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
                   RowParallelLinear.shard(down_weight, None, rank, tp, "down", "down_weight", "ffn"))

    def partials(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the rank's [gate; up] columns, its down partial [tokens, hidden] before the all-reduce) (TP-5.1, TP-5.2)."""
        gate_up = self.gate_up.partial(x)
        return gate_up, self.down.partial(silu_and_mul(gate_up))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """down(silu(gate) · up), the down partials all-reduced (TP-5.1, TP-5.2)."""
        return self.down.collective(self.partials(x)[1])
