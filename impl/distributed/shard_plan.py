"""The TP-W2 shard plan: which slice of which checkpoint tensor every tensor-parallel rank holds (spec/tensor-parallel.md
TP-4.1 to TP-4.8), as vLLM 0.33.0's linear and vocab-parallel layers cut them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from impl.v1.field_checks import check_fields, check_int

VOCAB_PADDING = 64
"""vLLM's DEFAULT_VOCAB_PADDING_SIZE (vllm/model_executor/layers/vocab_parallel_embedding.py), TP-4.5."""

GEOMETRY_FIELDS = ("hidden", "num_heads", "num_kv_heads", "head_dim", "ffn", "vocab")
"""The integer fields of a geometry, in the order they are checked (TP-4.8)."""

Span = tuple[int, int]
"""A half-open range [start, end) of rows or columns of an unsharded checkpoint tensor."""


@dataclass(frozen=True)
class ModelGeometry:
    """The sizes of a Qwen3/Llama-style decoder that decide its shards (TP-4.7)."""

    hidden: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tie_word_embeddings: bool = False

    def __post_init__(self) -> None:
        for name in GEOMETRY_FIELDS:
            check_int("geometry", name, getattr(self, name), minimum=1)
        if not isinstance(self.tie_word_embeddings, bool):
            raise TypeError(f"geometry.tie_word_embeddings must be a bool, got {self.tie_word_embeddings!r} "
                            f"({type(self.tie_word_embeddings).__name__})")

    @classmethod
    def from_mapping(cls, fields: Mapping[str, Any]) -> "ModelGeometry":
        """A geometry from a mapping of its fields; an unknown or missing field is a ValueError naming it (TP-4.8)."""
        if not isinstance(fields, Mapping):
            raise TypeError(f"geometry must be a mapping of {', '.join(GEOMETRY_FIELDS)}, tie_word_embeddings; "
                            f"got {fields!r} ({type(fields).__name__})")
        check_fields("geometry", fields, (*GEOMETRY_FIELDS, "tie_word_embeddings"), GEOMETRY_FIELDS)
        return cls(**fields)


@dataclass(frozen=True)
class WeightPart:
    """One checkpoint tensor's slice inside a rank's weight: its rows and columns in the unsharded tensor."""

    source: str
    rows: Span
    cols: Span


@dataclass(frozen=True)
class WeightShard:
    """A rank's weight of one layer: its shape [out, in], its parts stacked along the rows in order, the bias range it
    adds (row-parallel layers: the whole bias on rank 0, TP-4.2) and its zero padding rows (vocab layers, TP-4.5)."""

    name: str
    shape: tuple[int, int]
    parts: tuple[WeightPart, ...]
    bias: Span | None = None
    padding_rows: int = 0


@dataclass(frozen=True)
class RankShards:
    """Everything one rank holds (TP-4.7)."""

    rank: int
    kv_shard: int
    vocab_range: Span
    vocab_loaded: Span
    weights: tuple[WeightShard, ...]


@dataclass(frozen=True)
class ShardPlan:
    """The shard plan of a geometry at ``tp`` ranks (TP-4.7)."""

    tp: int
    padded_vocab: int
    heads_per_rank: int
    kv_heads_per_rank: int
    kv_replicas: int
    ranks: tuple[RankShards, ...]

    def as_plain(self) -> dict[str, Any]:
        """The plan as the tp-shard-plan operation's plain data (gates/rows/backend_distributed_tp/operations.yaml)."""
        return {
            "tp": self.tp, "padded_vocab": self.padded_vocab, "heads_per_rank": self.heads_per_rank,
            "kv_heads_per_rank": self.kv_heads_per_rank, "kv_replicas": self.kv_replicas,
            "ranks": [{
                "rank": rank.rank, "kv_shard": rank.kv_shard, "vocab_range": list(rank.vocab_range),
                "vocab_loaded": list(rank.vocab_loaded),
                "weights": {weight.name: {
                    "shape": list(weight.shape),
                    "parts": [{"source": part.source, "rows": list(part.rows), "cols": list(part.cols)} for part in weight.parts],
                    "bias": None if weight.bias is None else list(weight.bias),
                    "padding_rows": weight.padding_rows,
                } for weight in rank.weights},
            } for rank in self.ranks],
        }


def pad_vocab(vocab: int, pad_to: int = VOCAB_PADDING) -> int:
    """The vocabulary rounded up to a multiple of ``pad_to`` (TP-4.5, vLLM's pad_vocab_size)."""
    return -(-vocab // pad_to) * pad_to


def divide(size: int, tp: int, what: str) -> int:
    """``size / tp``, or a ValueError naming ``what`` and both numbers when tp does not divide it (vLLM's divide)."""
    if size % tp:
        raise ValueError(f"{what} is not divisible by tp={tp}")
    return size // tp


def kv_layout(num_heads: int, num_kv_heads: int, tp: int) -> tuple[int, int]:
    """(KV heads per rank, replicas of each KV head) of QKVParallelLinear (TP-4.3); ValueError for a split vLLM
    refuses (TP-4.8)."""
    if tp >= num_kv_heads:
        if tp % num_kv_heads:
            raise ValueError(f"num_kv_heads={num_kv_heads} does not divide tp={tp} (tp >= num_kv_heads replicates each "
                             f"KV head tp/num_kv_heads times)")
        heads, replicas = 1, tp // num_kv_heads
    else:
        heads, replicas = divide(num_kv_heads, tp, f"num_kv_heads={num_kv_heads}"), 1
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads} (grouped-query attention)")
    return heads, replicas


def _column(lo: int, size: int) -> Span:
    return (lo * size, (lo + 1) * size)


def _rank_shards(geometry: ModelGeometry, tp: int, rank: int, plan: ShardPlan) -> RankShards:
    """Rank ``rank``'s slices of every weight (TP-4.1 to TP-4.6)."""
    hidden, head_dim = geometry.hidden, geometry.head_dim
    q_rows = plan.heads_per_rank * head_dim
    kv_rows = plan.kv_heads_per_rank * head_dim
    ffn_rows = geometry.ffn // tp
    kv_shard = rank // plan.kv_replicas
    whole = (0, hidden)
    qkv = WeightShard("qkv_proj", (q_rows + 2 * kv_rows, hidden), (
        WeightPart("q_proj", _column(rank, q_rows), whole),
        WeightPart("k_proj", _column(kv_shard, kv_rows), whole),
        WeightPart("v_proj", _column(kv_shard, kv_rows), whole)))
    bias = whole if rank == 0 else None
    o_proj = WeightShard("o_proj", (hidden, q_rows), (WeightPart("o_proj", whole, _column(rank, q_rows)),), bias)
    gate_up = WeightShard("gate_up_proj", (2 * ffn_rows, hidden), (
        WeightPart("gate_proj", _column(rank, ffn_rows), whole), WeightPart("up_proj", _column(rank, ffn_rows), whole)))
    down = WeightShard("down_proj", (hidden, ffn_rows), (WeightPart("down_proj", whole, _column(rank, ffn_rows)),), bias)
    per_rank = plan.padded_vocab // tp
    vocab_range = _column(rank, per_rank)
    loaded = (min(vocab_range[0], geometry.vocab), min(vocab_range[1], geometry.vocab))
    padding = per_rank - (loaded[1] - loaded[0])
    embed = WeightShard("embed_tokens", (per_rank, hidden), (WeightPart("embed_tokens", loaded, whole),), None, padding)
    head_source = "embed_tokens" if geometry.tie_word_embeddings else "lm_head"
    lm_head = WeightShard("lm_head", (per_rank, hidden), (WeightPart(head_source, loaded, whole),), None, padding)
    return RankShards(rank, kv_shard, vocab_range, loaded, (qkv, o_proj, gate_up, down, embed, lm_head))


def shard_plan(geometry: ModelGeometry, tp: int) -> ShardPlan:
    """Every rank's shards of ``geometry`` at ``tp`` ranks (TP-4.7); ValueError for a geometry vLLM cannot shard,
    naming the numbers (TP-4.8)."""
    check_int("", "tp", tp, minimum=1)
    heads = divide(geometry.num_heads, tp, f"num_heads={geometry.num_heads}")
    kv_heads, replicas = kv_layout(geometry.num_heads, geometry.num_kv_heads, tp)
    divide(geometry.ffn, tp, f"ffn={geometry.ffn}")
    padded = pad_vocab(geometry.vocab)
    divide(padded, tp, f"the padded vocab {padded} (vocab={geometry.vocab} padded to a multiple of {VOCAB_PADDING})")
    plan = ShardPlan(tp, padded, heads, kv_heads, replicas, ())
    return ShardPlan(tp, padded, heads, kv_heads, replicas, tuple(_rank_shards(geometry, tp, rank, plan) for rank in range(tp)))


def shard_plan_of(geometry: Mapping[str, Any], tp: int) -> dict[str, Any]:
    """The tp-shard-plan operation: ``shard_plan(ModelGeometry.from_mapping(geometry), tp)`` as plain data."""
    return shard_plan(ModelGeometry.from_mapping(geometry), tp).as_plain()
