"""vLLM's own TP-W2 shard plan as plain data: the tp-shard-plan operation (spec/tensor-parallel.md TP-4.1 to TP-4.8)
answered by vLLM 0.33.0's layers on CPU.

For each rank, the TP group is faked (``parallel_state._TP`` is a stand-in with that rank and size, whose all-reduce
returns the rank's own tensor), and vLLM's own layers are built in float64: ``QKVParallelLinear``, ``RowParallelLinear``
(o_proj, down_proj, with a bias), ``MergedColumnParallelLinear`` (gate_up_proj), ``VocabParallelEmbedding`` and
``ParallelLMHead`` (tied with ``tie_weights`` where the geometry says so), from
vllm/model_executor/layers/linear.py and vllm/model_executor/layers/vocab_parallel_embedding.py. Every checkpoint
tensor is filled with tags, ``1 + source·2^40 + row·in + col``, and loaded through the layer's own ``weight_loader``;
the rank's weight is then read back: each run of rows from one source is a part, its tags give the rows and columns
it came from, and rows left zero are padding. The bias owner is read from the row layer's own ``forward`` on a zero
input (the bias comes out on the ranks that add it). vLLM's refusals (``divide``'s assertion) are ValueErrors with
vLLM's text. vLLM's ``Attention`` (vllm/model_executor/layers/attention/attention.py) asserts its per-rank
``num_heads % num_kv_heads == 0``; building it needs a whole model config, so that assertion is applied here to the
QKV layer's own per-rank counts.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, Iterator, Mapping
from unittest import mock

import upstream  # noqa: F401  (environment before vLLM's import)

import torch
import vllm.distributed.parallel_state as parallel_state
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.layers import linear, vocab_parallel_embedding as vocab_layers

SOURCES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "embed_tokens", "lm_head")
TAG = 1 << 40  # tags stay exact in float64 for tensors of up to 2^40 elements
_LOCK = threading.Lock()


@contextmanager
def _rank_of(tp: int, rank: int) -> Iterator[None]:
    """vLLM's TP group faked as rank ``rank`` of ``tp`` (its all-reduce: the rank's own tensor), and a default
    VllmConfig current, for building layers."""
    group = SimpleNamespace(rank_in_group=rank, world_size=tp, all_reduce=lambda tensor: tensor)
    with _LOCK, mock.patch.object(parallel_state, "_TP", group), set_current_vllm_config(VllmConfig()):
        yield


def _tagged(source: str, rows: int, cols: int) -> torch.Tensor:
    """A checkpoint tensor [rows, cols] whose every element names its source, row and column."""
    index = torch.arange(rows * cols, dtype=torch.float64).reshape(rows, cols)
    return 1 + SOURCES.index(source) * TAG + index


def _read_back(weight: torch.Tensor, columns_of: Mapping[str, int]) -> dict[str, Any]:
    """A loaded rank weight as the operation's ``shape``, ``parts`` and ``padding_rows``."""
    tags = weight.detach().to(torch.float64)
    parts: list[dict[str, Any]] = []
    padding = 0
    for row in tags:
        if not row.any():
            padding += 1
            continue
        codes = (row - 1).to(torch.int64)
        sources = {int(code) // TAG for code in codes}
        if len(sources) != 1:
            raise RuntimeError(f"a weight row mixes sources {sorted(SOURCES[s] for s in sources)}")
        source = SOURCES[sources.pop()]
        width = columns_of[source]
        within = codes % TAG
        rows = {int(v) // width for v in within}
        cols = [int(v) % width for v in within]
        if len(rows) != 1:
            raise RuntimeError(f"a weight row of {source} mixes checkpoint rows {sorted(rows)}")
        checkpoint_row = rows.pop()
        span_cols = [cols[0], cols[-1] + 1]
        if cols != list(range(*span_cols)):
            raise RuntimeError(f"{source} row {checkpoint_row}: columns {cols} are not one range")
        last = parts[-1] if parts else None
        if last and last["source"] == source and last["rows"][1] == checkpoint_row and last["cols"] == span_cols:
            last["rows"][1] += 1
        else:
            parts.append({"source": source, "rows": [checkpoint_row, checkpoint_row + 1], "cols": span_cols})
    return {"shape": list(weight.shape), "parts": parts, "padding_rows": padding}


def _bias_of(layer: Any, hidden: int) -> list[int] | None:
    """The bias range a row layer's forward adds on this rank: its output on a zero input. On CPU vLLM's gemm calls
    the layer's ``cpu_linear``, which ``process_weights_after_loading`` packs; the plain one vLLM itself falls back to
    (UnquantizedLinearMethod, ``_cpu_skip_gemm_dispatch``) is set instead."""
    layer.cpu_linear = torch.nn.functional.linear
    out = layer(torch.zeros(1, layer.input_size_per_partition, dtype=torch.float64))
    out = out[0] if isinstance(out, tuple) else out
    return [0, hidden] if bool(out.any()) else None


def _rank_plan(geometry: Mapping[str, Any], tp: int, rank: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """vLLM's layers of one rank, loaded with tagged checkpoint tensors: (the plan's rank entry, the plan's totals)."""
    hidden, hq, hkv = geometry["hidden"], geometry["num_heads"], geometry["num_kv_heads"]
    head_dim, ffn, vocab = geometry["head_dim"], geometry["ffn"], geometry["vocab"]
    f64 = torch.float64
    columns = {"q_proj": hidden, "k_proj": hidden, "v_proj": hidden, "o_proj": hq * head_dim, "gate_proj": hidden,
               "up_proj": hidden, "down_proj": ffn, "embed_tokens": hidden, "lm_head": hidden}
    with _rank_of(tp, rank):
        qkv = linear.QKVParallelLinear(hidden, head_dim, hq, hkv, bias=False, params_dtype=f64)
        if qkv.num_heads % qkv.num_kv_heads:
            raise ValueError(f"num_heads ({qkv.num_heads}) is not divisible by num_kv_heads ({qkv.num_kv_heads})")
        o_proj = linear.RowParallelLinear(hq * head_dim, hidden, bias=True, params_dtype=f64)
        gate_up = linear.MergedColumnParallelLinear(hidden, [ffn, ffn], bias=False, params_dtype=f64)
        down = linear.RowParallelLinear(ffn, hidden, bias=True, params_dtype=f64)
        embed = vocab_layers.VocabParallelEmbedding(vocab, hidden, params_dtype=f64)
        head = vocab_layers.ParallelLMHead(vocab, hidden, params_dtype=f64)
        if geometry.get("tie_word_embeddings", False):
            head = head.tie_weights(embed)
        for shard, source, rows in (("q", "q_proj", hq * head_dim), ("k", "k_proj", hkv * head_dim),
                                    ("v", "v_proj", hkv * head_dim)):
            qkv.weight_loader(qkv.weight, _tagged(source, rows, hidden), shard)
        for index, source in enumerate(("gate_proj", "up_proj")):
            gate_up.weight_loader(gate_up.weight, _tagged(source, ffn, hidden), index)
        for layer, source, rows, cols in ((o_proj, "o_proj", hidden, hq * head_dim), (down, "down_proj", hidden, ffn)):
            layer.weight_loader(layer.weight, _tagged(source, rows, cols))
            layer.weight_loader(layer.bias, torch.ones(hidden, dtype=f64))
        embed.weight_loader(embed.weight, _tagged("embed_tokens", vocab, hidden))
        if not geometry.get("tie_word_embeddings", False):
            head.weight_loader(head.weight, _tagged("lm_head", vocab, hidden))
        indices = embed.shard_indices
        loaded = [indices.org_vocab_start_index, indices.org_vocab_end_index]
        weights = {"qkv_proj": _read_back(qkv.weight, columns), "o_proj": _read_back(o_proj.weight, columns),
                   "gate_up_proj": _read_back(gate_up.weight, columns), "down_proj": _read_back(down.weight, columns),
                   "embed_tokens": _read_back(embed.weight, columns), "lm_head": _read_back(head.weight, columns)}
        weights["o_proj"]["bias"] = _bias_of(o_proj, hidden)
        weights["down_proj"]["bias"] = _bias_of(down, hidden)
        for name in ("qkv_proj", "gate_up_proj", "embed_tokens", "lm_head"):
            weights[name]["bias"] = None
        for name in ("embed_tokens", "lm_head"):
            if not weights[name]["parts"]:  # padding only: vLLM's empty range, at its clipped start
                source = "embed_tokens" if name == "embed_tokens" or geometry.get("tie_word_embeddings", False) else "lm_head"
                weights[name]["parts"] = [{"source": source, "rows": list(loaded), "cols": [0, hidden]}]
        order = ("shape", "parts", "bias", "padding_rows")
        k_rows = weights["qkv_proj"]["parts"][1]["rows"]
        entry = {"rank": rank, "kv_shard": k_rows[0] // (k_rows[1] - k_rows[0]),
                 "vocab_range": [indices.padded_org_vocab_start_index, indices.padded_org_vocab_end_index],
                 "vocab_loaded": loaded,
                 "weights": {name: {key: weight[key] for key in order} for name, weight in weights.items()}}
        totals = {"padded_vocab": embed.num_embeddings_padded, "heads_per_rank": qkv.num_heads,
                  "kv_heads_per_rank": qkv.num_kv_heads, "kv_replicas": qkv.num_kv_head_replicas}
    return entry, totals


def shard_plan(geometry: Mapping[str, Any], tp: int) -> dict[str, Any]:
    """The tp-shard-plan operation (gates/rows/backend_distributed_tp/operations.yaml) by vLLM's own layers and
    loaders; vLLM's refusal as a ValueError with its text."""
    ranks, totals = [], {}
    try:
        for rank in range(tp):
            entry, totals = _rank_plan(geometry, tp, rank)
            ranks.append(entry)
    except AssertionError as exc:  # vllm/distributed/utils.py ensure_divisibility; MergedColumnParallelLinear's assert
        raise ValueError(f"vLLM refused tp={tp} for {dict(geometry)}: {exc}") from None
    return {"tp": tp, **totals, "ranks": ranks}
