"""A Qwen3-style decoder run tensor-parallel on a gloo world of tp ranks, greedy (spec/tensor-parallel.md TP-5.5;
issue 30 item 3): the operation tp-model-greedy of gates/rows/backend_distributed_tp/operations.yaml.

Every rank builds vLLM 0.33.0's Qwen3 layers (vllm/model_executor/models/qwen3.py, qwen2.py) out of the full
checkpoint tensors, each layer class cutting its rank's shard as the shard plan says (impl/model_executor/layers,
impl/distributed/shard_plan.py, TP-4.x): the vocab-parallel embedding, per layer RMSNorm, QKVParallelLinear (q/k/v
biases with config.qkv_bias), per-head q/k RMSNorm, neox RoPE, causal grouped-query attention over the rank's heads,
o_proj RowParallelLinear (its bias on rank 0 with config.o_proj_bias), the residual, RMSNorm, the ParallelMLP
(gate_up merged column, silu(gate)·up, down row-parallel), the residual; then the final RMSNorm and the ParallelLMHead
(the tied embedding's weight with tie_word_embeddings); greedy argmax. This module composes the layers and holds no
sharding of its own. The whole sequence is recomputed each step (no KV cache).

The same layer code runs the decoder-taps forward (qwen3_taps.py, spec/model-taps.md): a Recorder (taps.py) gets each
named intermediate and may replace the residual stream at the feed points; the greedy decode's NO_TAPS does neither.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch

from impl.distributed.shard_plan import HeadLayout
from impl.model_executor.layers.layernorm import rms_norm
from impl.model_executor.layers.linear import ParallelMLP, QKVParallelLinear, RowParallelLinear
from impl.model_executor.layers.rotary_embedding import cos_sin_cache, rotary_embedding
from impl.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding
from impl.model_executor.models.qwen3_weights import ModelConfig, checked_inputs
from impl.model_executor.models.taps import NO_TAPS, Recorder

CALL_TIMEOUT_S = 120.0
"""How long one greedy run may take on the world before the ranks are taken as stuck."""

RankFunction = Callable[[int, int, Any], Any]


@dataclass(frozen=True)
class RankLayer:
    """One decoder layer as a rank holds it: the norms whole, the projections as their layer classes cut them."""

    input_norm: torch.Tensor
    qkv: QKVParallelLinear
    q_norm: torch.Tensor
    k_norm: torch.Tensor
    o_proj: RowParallelLinear
    post_norm: torch.Tensor
    mlp: ParallelMLP


@dataclass(frozen=True)
class RankModel:
    """Everything a rank runs with: its embedding, layers and LM head, the final norm, the RoPE table."""

    config: ModelConfig
    embed: VocabParallelEmbedding
    layers: tuple[RankLayer, ...]
    final_norm: torch.Tensor
    lm_head: ParallelLMHead
    rope_cache: torch.Tensor


def _rank_layer(config: ModelConfig, weights: Mapping[str, torch.Tensor], index: int, tp: int,
                rank: int) -> RankLayer:
    """Layer ``index`` of rank ``rank``: model.layers.{index}.* cut by its layer classes."""
    g = config.geometry

    def tensor(name: str) -> torch.Tensor:
        return weights[f"model.layers.{index}.{name}"]

    qkv_biases = None
    if config.qkv_bias:
        qkv_biases = (tensor("self_attn.q_proj.bias"), tensor("self_attn.k_proj.bias"), tensor("self_attn.v_proj.bias"))
    qkv = QKVParallelLinear.shard(tensor("self_attn.q_proj.weight"), tensor("self_attn.k_proj.weight"),
                                  tensor("self_attn.v_proj.weight"), qkv_biases, g.num_heads, g.num_kv_heads,
                                  g.head_dim, rank, tp)
    o_bias = tensor("self_attn.o_proj.bias") if config.o_proj_bias else None
    return RankLayer(
        input_norm=tensor("input_layernorm.weight"), qkv=qkv, q_norm=tensor("self_attn.q_norm.weight"),
        k_norm=tensor("self_attn.k_norm.weight"),
        o_proj=RowParallelLinear.shard(tensor("self_attn.o_proj.weight"), o_bias, rank, tp),
        post_norm=tensor("post_attention_layernorm.weight"),
        mlp=ParallelMLP.shard(tensor("mlp.gate_proj.weight"), tensor("mlp.up_proj.weight"),
                              tensor("mlp.down_proj.weight"), rank, tp))


def rank_model(config: ModelConfig, weights: Mapping[str, torch.Tensor], tp: int, rank: int) -> RankModel:
    """Rank ``rank``'s model at ``tp`` ranks, each layer cut from the full ``weights`` by its layer class (TP-4.7)."""
    embed = weights["model.embed_tokens.weight"]
    head = embed if config.geometry.tie_word_embeddings else weights["lm_head.weight"]
    cache = cos_sin_cache(config.geometry.head_dim, config.max_position, config.rope_theta).to(embed.device)
    return RankModel(config, VocabParallelEmbedding.shard(embed, rank, tp),
                     tuple(_rank_layer(config, weights, index, tp, rank) for index in range(config.layers)),
                     weights["model.norm.weight"], ParallelLMHead.shard(head, rank, tp), cache)


def _attention(heads: HeadLayout, head_dim: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal grouped-query attention over the rank's heads, scale head_dim^-0.5, softmax in float32."""
    tokens, count, kv_count = q.shape[0], heads.heads_per_rank, heads.kv_heads_per_rank
    q = q.view(tokens, count, head_dim).transpose(0, 1)
    group = count // kv_count
    k = k.reshape(tokens, kv_count, head_dim).transpose(0, 1).repeat_interleave(group, dim=0)
    v = v.reshape(tokens, kv_count, head_dim).transpose(0, 1).repeat_interleave(group, dim=0)
    scores = (q @ k.transpose(1, 2)).float() * head_dim ** -0.5
    future = torch.ones(tokens, tokens, dtype=torch.bool, device=q.device).triu(1)
    probs = scores.masked_fill(future, float("-inf")).softmax(dim=-1).to(v.dtype)
    return (probs @ v).transpose(0, 1).reshape(tokens, count * head_dim)


def _layer(model: RankModel, layer: RankLayer, hidden: torch.Tensor, positions: torch.Tensor,
           recorder: Recorder = NO_TAPS, name: str = "") -> torch.Tensor:
    """One Qwen3DecoderLayer on the rank's shards; the residual stream stays whole on every rank. The recorder gets
    the layer's taps under ``name`` (``layers.{i}.``) and may feed its two sub-blocks (spec/model-taps.md MT-1.2)."""
    config = model.config
    eps, head_dim, heads = config.rms_norm_eps, config.geometry.head_dim, layer.qkv.heads
    hidden = recorder.fed(name + "attn.in", hidden)
    q, k, v = layer.qkv.forward(rms_norm(hidden, layer.input_norm, eps))
    q = rms_norm(q.reshape(-1, heads.heads_per_rank, head_dim), layer.q_norm, eps).reshape(q.shape)
    k = rms_norm(k.reshape(-1, heads.kv_heads_per_rank, head_dim), layer.k_norm, eps).reshape(k.shape)
    q, k = rotary_embedding(positions, q, k, head_dim, head_dim, model.rope_cache, True)
    recorder.tap_heads(name + "attn.k", k, heads.kv_replicas)
    recorder.tap_heads(name + "attn.v", v, heads.kv_replicas)
    partial = layer.o_proj.partial(_attention(heads, head_dim, q, k, v))  # TP-5.2, the bias on rank 0
    attended = recorder.reduced(name + "attn.out", partial, layer.o_proj.collective)
    hidden = recorder.fed(name + "mlp.in", hidden + attended)
    partial = layer.mlp.partials(rms_norm(hidden, layer.post_norm, eps))[1]
    mlp = recorder.reduced(name + "mlp.out", partial, layer.mlp.down.collective)
    return recorder.tap(name + "out", hidden + mlp)


def decoder(model: RankModel, ids: torch.Tensor, recorder: Recorder = NO_TAPS) -> torch.Tensor:
    """The residual stream [T, hidden] entering the final norm: the embedding, then every layer (MT-1.1)."""
    hidden = recorder.tap("embed", model.embed.forward(ids))
    positions = torch.arange(ids.shape[0], device=ids.device)
    for index, layer in enumerate(model.layers):
        hidden = _layer(model, layer, hidden, positions, recorder, f"layers.{index}.")
    return recorder.fed("norm.in", hidden)


def head(model: RankModel, hidden: torch.Tensor, recorder: Recorder = NO_TAPS) -> torch.Tensor:
    """The logits [rows, vocab] of the residual stream's rows: the final RMSNorm, then the LM head (TP-5.4)."""
    normed = recorder.tap("norm.out", rms_norm(hidden, model.final_norm, model.config.rms_norm_eps))
    return model.lm_head.logits(normed)


def _next_logits(model: RankModel, ids: torch.Tensor) -> torch.Tensor:
    """The logits [vocab] of the last position: the forward, the head over that position alone."""
    return head(model, decoder(model, ids)[-1:])[0]


def greedy(model: RankModel, prompt: torch.Tensor, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens int64 [steps], logits float32 [steps, vocab]) of a greedy decode; an exact tie goes to the lowest id."""
    ids = prompt.to(model.embed.weight.device)
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
