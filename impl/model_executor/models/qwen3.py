"""A Qwen3-style decoder run tensor-parallel on a gloo world of tp ranks, greedy (spec/tensor-parallel.md TP-5.5;
issue 30 item 3): the operation tp-model-greedy of gates/rows/backend_distributed_tp/operations.yaml.

Every rank cuts its shards out of the full checkpoint tensors as the shard plan says (impl/distributed/shard_plan.py,
TP-4.x) and runs vLLM 0.33.0's Qwen3 forward (vllm/model_executor/models/qwen3.py, qwen2.py) on them: the
vocab-parallel embedding all-reduced, per layer RMSNorm, the rank's fused QKV (no bias), per-head q/k RMSNorm, neox
RoPE, causal grouped-query attention over the rank's heads, o_proj row-parallel and all-reduced, the residual,
RMSNorm, gate_up (merged column), silu(gate)·up, down row-parallel and all-reduced, the residual; then the final
RMSNorm, the rank's lm_head shard, the logits all-gathered in rank order and trimmed to the vocabulary; greedy
argmax. The whole sequence is recomputed each step (no KV cache).

The same layer code runs the decoder-taps forward (qwen3_taps.py, spec/model-taps.md): a Recorder (taps.py) gets each
named intermediate and may replace the residual stream at the feed points; the greedy decode's NO_TAPS does neither.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch

from impl.distributed import communication_op
from impl.distributed.shard_plan import RankShards, WeightShard, shard_plan
from impl.model_executor.layers.layernorm import rms_norm
from impl.model_executor.layers.rotary_embedding import cos_sin_cache, rotary_embedding
from impl.model_executor.models.qwen3_weights import ModelConfig, checked_inputs
from impl.model_executor.models.taps import NO_TAPS, Recorder

CALL_TIMEOUT_S = 120.0
"""How long one greedy run may take on the world before the ranks are taken as stuck."""

RankFunction = Callable[[int, int, Any], Any]

_LAYER_SOURCES = {"q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj", "v_proj": "self_attn.v_proj",
                  "o_proj": "self_attn.o_proj", "gate_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj",
                  "down_proj": "mlp.down_proj"}
"""The shard plan's per-layer source names -> the HF tensor names under model.layers.{i}."""


@dataclass(frozen=True)
class RankLayer:
    """One decoder layer as a rank holds it: the norms whole, the projections cut by the shard plan."""

    input_norm: torch.Tensor
    qkv: torch.Tensor
    q_norm: torch.Tensor
    k_norm: torch.Tensor
    o_proj: torch.Tensor
    post_norm: torch.Tensor
    gate_up: torch.Tensor
    down: torch.Tensor


@dataclass(frozen=True)
class RankModel:
    """Everything a rank runs with: its layers, its vocabulary shards and ranges, its head counts, the RoPE table."""

    config: ModelConfig
    heads: int
    kv_heads: int
    vocab_loaded: tuple[int, int]
    embed: torch.Tensor
    layers: tuple[RankLayer, ...]
    final_norm: torch.Tensor
    lm_head: torch.Tensor
    rope_cache: torch.Tensor


def _source_name(source: str, layer: int | None) -> str:
    """The HF tensor a shard-plan part reads."""
    if source == "embed_tokens":
        return "model.embed_tokens.weight"
    if source == "lm_head":
        return "lm_head.weight"
    return f"model.layers.{layer}.{_LAYER_SOURCES[source]}.weight"


def _cut(shard: WeightShard, weights: Mapping[str, torch.Tensor], layer: int | None) -> torch.Tensor:
    """A rank's weight: its parts sliced out of the checkpoint tensors, stacked along the rows, padding rows zero
    (TP-4.1 to TP-4.6)."""
    pieces = [weights[_source_name(part.source, layer)][part.rows[0]:part.rows[1], part.cols[0]:part.cols[1]]
              for part in shard.parts]
    if shard.padding_rows:
        template = pieces[0]
        pieces.append(template.new_zeros((shard.padding_rows, template.shape[1])))
    weight = torch.cat(pieces, dim=0).contiguous()
    if tuple(weight.shape) != shard.shape:
        raise AssertionError(f"{shard.name}: cut to {tuple(weight.shape)}, the shard plan says {shard.shape}")
    return weight


def rank_model(config: ModelConfig, weights: Mapping[str, torch.Tensor], tp: int, rank: int) -> RankModel:
    """Rank ``rank``'s model at ``tp`` ranks, cut from the full ``weights`` by the shard plan (TP-4.7)."""
    plan = shard_plan(config.geometry, tp)
    mine: RankShards = plan.ranks[rank]
    shards = {shard.name: shard for shard in mine.weights}
    layers = []
    for layer in range(config.layers):
        prefix = f"model.layers.{layer}."
        layers.append(RankLayer(
            input_norm=weights[prefix + "input_layernorm.weight"], qkv=_cut(shards["qkv_proj"], weights, layer),
            q_norm=weights[prefix + "self_attn.q_norm.weight"], k_norm=weights[prefix + "self_attn.k_norm.weight"],
            o_proj=_cut(shards["o_proj"], weights, layer), post_norm=weights[prefix + "post_attention_layernorm.weight"],
            gate_up=_cut(shards["gate_up_proj"], weights, layer), down=_cut(shards["down_proj"], weights, layer)))
    first = next(iter(weights.values()))
    cache = cos_sin_cache(config.geometry.head_dim, config.max_position, config.rope_theta).to(first.device)
    return RankModel(config, plan.heads_per_rank, plan.kv_heads_per_rank, mine.vocab_loaded,
                     _cut(shards["embed_tokens"], weights, None), tuple(layers), weights["model.norm.weight"],
                     _cut(shards["lm_head"], weights, None), cache)


def _embed(model: RankModel, ids: torch.Tensor) -> torch.Tensor:
    """VocabParallelEmbedding (TP-5.3): ids outside the rank's loaded range read row 0 and are zeroed; all-reduced."""
    start, end = model.vocab_loaded
    inside = (ids >= start) & (ids < end)
    rows = model.embed[torch.where(inside, ids - start, torch.zeros_like(ids))]
    return communication_op.all_reduce(rows * inside.unsqueeze(-1).to(rows.dtype))


def _attention(model: RankModel, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal grouped-query attention over the rank's heads, scale head_dim^-0.5, softmax in float32."""
    tokens, head_dim = q.shape[0], model.config.geometry.head_dim
    q = q.view(tokens, model.heads, head_dim).transpose(0, 1)
    group = model.heads // model.kv_heads
    k = k.view(tokens, model.kv_heads, head_dim).transpose(0, 1).repeat_interleave(group, dim=0)
    v = v.view(tokens, model.kv_heads, head_dim).transpose(0, 1).repeat_interleave(group, dim=0)
    scores = (q @ k.transpose(1, 2)).float() * head_dim ** -0.5
    future = torch.ones(tokens, tokens, dtype=torch.bool, device=q.device).triu(1)
    probs = scores.masked_fill(future, float("-inf")).softmax(dim=-1).to(v.dtype)
    return (probs @ v).transpose(0, 1).reshape(tokens, model.heads * head_dim)


def _mlp(layer: RankLayer, x: torch.Tensor) -> torch.Tensor:
    """The rank's partial of the MLP over the normed stream: silu(gate) * up through its down_proj rows."""
    gate, up = (x @ layer.gate_up.T).chunk(2, dim=-1)  # TP-4.4: the rank's gate rows, then its up rows
    return (torch.nn.functional.silu(gate) * up) @ layer.down.T


def _kv_replicas(model: RankModel) -> int:
    """How many consecutive ranks hold each KV head (1 where tp <= Hkv; TP-4.3)."""
    return communication_op.world_size() * model.kv_heads // model.config.geometry.num_kv_heads


def _layer(model: RankModel, layer: RankLayer, hidden: torch.Tensor, positions: torch.Tensor,
           recorder: Recorder = NO_TAPS, name: str = "") -> torch.Tensor:
    """One Qwen3DecoderLayer on the rank's shards; the residual stream stays whole on every rank. The recorder gets
    the layer's taps under ``name`` (``layers.{i}.``) and may feed its two sub-blocks (spec/model-taps.md MT-1.2)."""
    config = model.config
    eps, head_dim = config.rms_norm_eps, config.geometry.head_dim
    hidden = recorder.fed(name + "attn.in", hidden)
    x = rms_norm(hidden, layer.input_norm, eps)
    q, k, v = (x @ layer.qkv.T).split([model.heads * head_dim, model.kv_heads * head_dim, model.kv_heads * head_dim], -1)
    q = rms_norm(q.reshape(-1, model.heads, head_dim), layer.q_norm, eps).reshape(q.shape)
    k = rms_norm(k.reshape(-1, model.kv_heads, head_dim), layer.k_norm, eps).reshape(k.shape)
    q, k = rotary_embedding(positions, q, k, head_dim, head_dim, model.rope_cache, True)
    recorder.tap_heads(name + "attn.k", k, _kv_replicas(model))
    recorder.tap_heads(name + "attn.v", v, _kv_replicas(model))
    attended = communication_op.all_reduce(_attention(model, q, k, v) @ layer.o_proj.T)  # TP-5.2
    hidden = recorder.fed(name + "mlp.in", hidden + recorder.tap(name + "attn.out", attended))
    mlp = communication_op.all_reduce(_mlp(layer, rms_norm(hidden, layer.post_norm, eps)))
    return recorder.tap(name + "out", hidden + recorder.tap(name + "mlp.out", mlp))


def decoder(model: RankModel, ids: torch.Tensor, recorder: Recorder = NO_TAPS) -> torch.Tensor:
    """The residual stream [T, hidden] entering the final norm: the embedding, then every layer (MT-1.1)."""
    hidden = recorder.tap("embed", _embed(model, ids))
    positions = torch.arange(ids.shape[0], device=ids.device)
    for index, layer in enumerate(model.layers):
        hidden = _layer(model, layer, hidden, positions, recorder, f"layers.{index}.")
    return recorder.fed("norm.in", hidden)


def head(model: RankModel, hidden: torch.Tensor, recorder: Recorder = NO_TAPS) -> torch.Tensor:
    """The logits [rows, vocab] of the residual stream's rows: the final RMSNorm, the rank's lm_head shard, gathered
    in rank order and trimmed to the vocabulary (TP-5.4)."""
    normed = recorder.tap("norm.out", rms_norm(hidden, model.final_norm, model.config.rms_norm_eps))
    return communication_op.all_gather(normed @ model.lm_head.T, dim=-1)[:, :model.config.geometry.vocab]


def _next_logits(model: RankModel, ids: torch.Tensor) -> torch.Tensor:
    """The logits [vocab] of the last position: the forward, the head over that position alone."""
    return head(model, decoder(model, ids)[-1:])[0]


def greedy(model: RankModel, prompt: torch.Tensor, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens int64 [steps], logits float32 [steps, vocab]) of a greedy decode; an exact tie goes to the lowest id."""
    ids = prompt.to(model.embed.device)
    tokens, logits = [], []
    for _ in range(steps):
        step = _next_logits(model, ids).float()
        best = torch.argmax(step)  # the first maximum
        tokens.append(best)
        logits.append(step)
        ids = torch.cat((ids, best.view(1)))
    return torch.stack(tokens).cpu(), torch.stack(logits).cpu()


@dataclass(frozen=True)
class GreedyRun:
    """What every rank gets: the checked inputs of one tp-model-greedy call."""

    config: ModelConfig
    weights: dict[str, torch.Tensor]
    prompt: torch.Tensor
    steps: int


def rank_greedy(rank: int, tp: int, run: GreedyRun) -> tuple[torch.Tensor, torch.Tensor]:
    """The rank function run_on_ranks calls: cut this rank's shards, decode."""
    torch.set_num_threads(1)
    return greedy(rank_model(run.config, run.weights, tp, rank), run.prompt, run.steps)


def _agreed(results: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank 0's result, once every rank returned the same bits; else a RuntimeError naming the first that did not."""
    tokens, logits = results[0]
    for rank, (their_tokens, their_logits) in enumerate(results[1:], start=1):
        if not torch.equal(their_tokens, tokens):
            raise RuntimeError(f"tp-model-greedy: rank {rank} decoded {their_tokens.tolist()}, rank 0 {tokens.tolist()}")
        if not torch.equal(their_logits, logits):
            off = (their_logits - logits).abs().max().item()
            raise RuntimeError(f"tp-model-greedy: rank {rank}'s logits differ from rank 0's (by up to {off:g})")
    return tokens, logits


def run_greedy(config: Mapping[str, Any], weights: Mapping[str, Any], prompt: Any, steps: int, tp: int,
               rank_fn: RankFunction) -> dict[str, torch.Tensor]:
    """The checked inputs decoded by ``rank_fn(rank, tp, GreedyRun)`` on every rank of the gloo world of ``tp``; rank
    0's {tokens, logits} once all agree."""
    from impl.distributed.gloo_world import run_on_ranks

    checked, full, ids, count, tp = checked_inputs(config, weights, prompt, steps, tp)
    tokens, logits = _agreed(run_on_ranks(tp, rank_fn, GreedyRun(checked, full, ids, count), timeout_s=CALL_TIMEOUT_S))
    return {"tokens": tokens, "logits": logits}


def tp_model_greedy(config: Mapping[str, Any], weights: Mapping[str, Any], prompt: Any, steps: int,
                    tp: int) -> dict[str, torch.Tensor]:
    """The tp-model-greedy operation: {tokens int64 [steps], logits float32 [steps, vocab]} as rank 0 of a gloo world
    of ``tp`` ranks decodes them (TP-5.5); invalid-argument errors name the field, the tensor and both shapes."""
    return run_greedy(config, weights, prompt, steps, tp, rank_greedy)


def greedy_on_device(config: Mapping[str, Any], weights: Mapping[str, Any], prompt: Any, steps: int,
                     dtype: str) -> dict[str, torch.Tensor]:
    """The model-greedy-on-device operation (issue 30 item 6): the tp=1 model on the current CUDA device with every
    weight cast to ``dtype`` (bfloat16 or float32), in one process; {tokens, logits float32} as tp-model-greedy."""
    targets = {"bfloat16": torch.bfloat16, "float32": torch.float32}
    if dtype not in targets:
        raise ValueError(f"dtype must be one of {', '.join(targets)}, got {dtype!r}")
    checked, full, ids, count, _ = checked_inputs(config, weights, prompt, steps, 1)
    if not torch.cuda.is_available():
        raise RuntimeError(f"model-greedy-on-device needs a CUDA device; torch {torch.__version__} sees none")
    device = torch.device("cuda", torch.cuda.current_device())
    on_device = {name: tensor.to(device=device, dtype=targets[dtype]) for name, tensor in full.items()}
    tokens, logits = greedy(rank_model(checked, on_device, 1, 0), ids, count)
    return {"tokens": tokens, "logits": logits}
