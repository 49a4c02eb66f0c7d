"""Known-bad tapped forwards for the decoder-taps gate (spec/model-taps.md MT-4.x): the port with one defect planted in
one layer only, layer PLANTED_LAYER, as a port that diverges there would have it. Each is documented with the tap where
it first shows (forward order, spec/model-taps.md MT-1.1), which `gates diverge` must name.

Each defect is patched into impl.model_executor.models.qwen3 inside the rank processes, for the call of qwen3._layer
that runs layer PLANTED_LAYER only, and undone after it (the gloo world is reused from call to call); the rank
functions below are module-level, so run_on_ranks pickles them by reference. On a model of fewer layers the defect is
absent: the 4-layer cases of the gate are those that show it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any, Callable, Iterator
from unittest import mock

import torch
import torch.distributed as dist

from impl.distributed import communication_op
from impl.model_executor.layers.linear import ParallelMLP
from impl.model_executor.layers.rotary_embedding import cos_sin_cache
from impl.model_executor.models import qwen3, qwen3_taps

PLANTED_LAYER = 2
"""The layer every defect is planted in (of the 4-layer model: one layer before it is right, one after it)."""

WRONG_ROPE_BASE = 1_000_000.0
"""The base the wrong-RoPE layer rotates by (Qwen3's real one, where the config says 10000)."""

FIRST_TAP = {
    "rope-base-wrong": "attn.k",
    "k-v-swapped": "attn.k",
    "rms-eps-outside-sqrt": "attn.k",
    "mlp-bfloat16-accumulation": "mlp.out",
    "o-proj-partial-dropped": "attn.out",
}
"""Each known-bad's first divergent tap in layer PLANTED_LAYER (``layers.2.`` + the name): the earlier taps of that
layer (attn.in) and every tap of layers 0 and 1 are the port's own."""

RANK_FIRST_TAP = {
    "o-proj-partial-dropped": ("attn.out", 1),
    "o-proj-rank1-heads-reversed": ("attn.out.rank1", 1),
}
"""The known-bads of the ranks' partials (spec/model-taps.md MT-1.6, MT-4.4): with the partials tapped at tp 2, each
one's first divergent tap in layer PLANTED_LAYER and the rank `gates diverge` attributes it to: rank 1's partial lost
by the reduce (its partial right, the reduced tap wrong), rank 1's partial itself wrong."""

LayerPatch = Callable[[qwen3.RankModel, qwen3.RankLayer], contextlib.AbstractContextManager[qwen3.RankLayer]]


@contextlib.contextmanager
def _in_planted_layer(patch: LayerPatch) -> Iterator[None]:
    """qwen3._layer runs layer PLANTED_LAYER under ``patch`` (which may hand it another RankLayer), the others as
    they are."""
    real = qwen3._layer

    def layer(model: qwen3.RankModel, weights: qwen3.RankLayer, hidden: torch.Tensor, positions: torch.Tensor,
              recorder: Any = qwen3.NO_TAPS, name: str = "") -> torch.Tensor:
        if name != f"layers.{PLANTED_LAYER}.":
            return real(model, weights, hidden, positions, recorder, name)
        with patch(model, weights) as planted:
            return real(model, planted, hidden, positions, recorder, name)

    with mock.patch.object(qwen3, "_layer", layer):
        yield


@contextlib.contextmanager
def _rope_base_wrong(model: qwen3.RankModel, layer: qwen3.RankLayer) -> Iterator[qwen3.RankLayer]:
    """RoPE's table built with base WRONG_ROPE_BASE instead of config.rope_theta."""
    real = qwen3.rotary_embedding
    wrong = cos_sin_cache(model.config.geometry.head_dim, model.config.max_position, WRONG_ROPE_BASE)

    def rope(positions: torch.Tensor, query: Any, key: Any, head_size: int, rotary_dim: int, cache: Any,
             neox: bool) -> Any:
        return real(positions, query, key, head_size, rotary_dim, wrong, neox)

    with mock.patch.object(qwen3, "rotary_embedding", rope):
        yield layer


@contextlib.contextmanager
def _k_v_swapped(model: qwen3.RankModel, layer: qwen3.RankLayer) -> Iterator[qwen3.RankLayer]:
    """k_proj's rows loaded where v_proj's go in the fused QKV weight, and v_proj's where k_proj's go."""
    qkv = layer.qkv
    q, k, v = qkv.weight.split([qkv.q_size, qkv.kv_size, qkv.kv_size])
    yield dataclasses.replace(layer, qkv=dataclasses.replace(qkv, weight=torch.cat((q, v, k))))


@contextlib.contextmanager
def _rms_eps_outside_sqrt(model: qwen3.RankModel, layer: qwen3.RankLayer) -> Iterator[qwen3.RankLayer]:
    """Every RMSNorm of the layer (input, q/k, post-attention) as x / (sqrt(mean(x²)) + eps) instead of
    x / sqrt(mean(x²) + eps), in float32 as the port's."""

    def norm(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: Any = None) -> torch.Tensor:
        wide = x.to(torch.float32)
        normed = wide / (wide.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)
        return (normed.to(weight.dtype) * weight).to(x.dtype)

    with mock.patch.object(qwen3, "rms_norm", norm):
        yield layer


@dataclasses.dataclass(frozen=True)
class _Bfloat16MLP(ParallelMLP):
    """A ParallelMLP whose rank computes gate_up, silu·up and down in bfloat16; its partials cast back to the input's
    dtype before the all-reduce."""

    def partials(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        narrow = ParallelMLP(dataclasses.replace(self.gate_up, weight=self.gate_up.weight.to(torch.bfloat16)),
                             dataclasses.replace(self.down, weight=self.down.weight.to(torch.bfloat16)))
        gate_up, down = narrow.partials(x.to(torch.bfloat16))
        return gate_up.to(x.dtype), down.to(x.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down.collective(self.partials(x)[1])


@contextlib.contextmanager
def _mlp_bfloat16_accumulation(model: qwen3.RankModel, layer: qwen3.RankLayer) -> Iterator[qwen3.RankLayer]:
    """The layer's MLP (gate_up, silu·up, down) computed in bfloat16, its result cast back to the compute dtype."""
    yield dataclasses.replace(layer, mlp=_Bfloat16MLP(layer.mlp.gate_up, layer.mlp.down))


@contextlib.contextmanager
def _o_proj_partial_dropped(model: qwen3.RankModel, layer: qwen3.RankLayer) -> Iterator[qwen3.RankLayer]:
    """The layer's first all-reduce (o_proj's) sums every rank's partial but rank 1's (at tp 1: nothing dropped)."""
    real = communication_op.all_reduce
    calls = []

    def all_reduce(tensor: torch.Tensor) -> torch.Tensor:
        calls.append(tensor)
        dropped = len(calls) == 1 and communication_op.world_size() > 1 and dist.get_rank() == 1
        return real(torch.zeros_like(tensor) if dropped else tensor)

    with mock.patch.object(communication_op, "all_reduce", all_reduce):
        yield layer


@contextlib.contextmanager
def _o_proj_rank1_heads_reversed(model: qwen3.RankModel, layer: qwen3.RankLayer) -> Iterator[qwen3.RankLayer]:
    """Rank 1 holds its heads' o_proj columns in reverse head order (a loader that walks its heads backwards); the
    other ranks and tp 1 are right."""
    if communication_op.world_size() < 2 or dist.get_rank() != 1:
        yield layer
        return
    o_proj, head_dim = layer.o_proj, model.config.geometry.head_dim
    blocks = o_proj.weight.split(head_dim, dim=1)
    yield dataclasses.replace(layer, o_proj=dataclasses.replace(o_proj, weight=torch.cat(blocks[::-1], dim=1)))


def _rank_with(patch: LayerPatch, rank: int, tp: int, run: qwen3_taps.TapsRun) -> dict[str, torch.Tensor]:
    """The rank function of a known-bad (bound to its patch by functools.partial, which pickles by reference)."""
    with _in_planted_layer(patch):
        return qwen3_taps.rank_taps(rank, tp, run)


def _planted(patch: LayerPatch) -> Callable[..., dict[str, torch.Tensor]]:
    """decoder-taps with ``patch`` planted in layer PLANTED_LAYER."""

    def known_bad(config: Any, weights: Any, ids: Any, tp: Any = 1, dtype: Any = "float32",
                  feed: Any = None, rank_partials: Any = False) -> dict[str, torch.Tensor]:
        return qwen3_taps.run_taps(config, weights, ids, tp, dtype, feed, rank_partials,
                                   functools.partial(_rank_with, patch))

    known_bad.__doc__ = f"decoder-taps with, in layer {PLANTED_LAYER} only: {patch.__doc__}"
    return known_bad


rope_base_wrong = _planted(_rope_base_wrong)
k_v_swapped = _planted(_k_v_swapped)
rms_eps_outside_sqrt = _planted(_rms_eps_outside_sqrt)
mlp_bfloat16_accumulation = _planted(_mlp_bfloat16_accumulation)
o_proj_partial_dropped = _planted(_o_proj_partial_dropped)
o_proj_rank1_heads_reversed = _planted(_o_proj_rank1_heads_reversed)
