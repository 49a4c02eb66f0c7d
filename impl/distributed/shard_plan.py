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


@dataclass(frozen=True)
class HeadLayout:
    """The attention heads one rank of QKVParallelLinear holds (TP-4.3): Hq/tp query heads, its KV heads, and how many
    consecutive ranks hold each KV head."""

    heads_per_rank: int
    kv_heads_per_rank: int
    kv_replicas: int

    def kv_shard(self, rank: int) -> int:
        """The KV shard rank ``rank`` loads: ``rank // replicas`` (TP-4.3)."""
        return rank // self.kv_replicas


def head_layout(num_heads: int, num_kv_heads: int, tp: int) -> HeadLayout:
    """The heads a rank holds at ``tp`` (TP-4.3); ValueError for a split vLLM refuses (TP-4.8)."""
    heads = divide(num_heads, tp, f"num_heads={num_heads}")
    kv_heads, replicas = kv_layout(num_heads, num_kv_heads, tp)
    return HeadLayout(heads, kv_heads, replicas)


def block(size: int, tp: int, rank: int, what: str) -> Span:
    """Rank ``rank``'s contiguous block ``[r·size/tp, (r+1)·size/tp)`` (TP-4.1, TP-4.2); ValueError naming ``what``
    when tp does not divide ``size``."""
    part = divide(size, tp, what)
    return (rank * part, (rank + 1) * part)


def _rows(span: Span) -> int:
    return span[1] - span[0]


def column_shard(name: str, source: str, out: int, columns_in: int, tp: int, rank: int) -> WeightShard:
    """ColumnParallelLinear's rank: rows ``block(out)`` of ``source``, every column; its bias takes the same rows
    (TP-4.1)."""
    rows = block(out, tp, rank, f"out={out}")
    return WeightShard(name, (_rows(rows), columns_in), (WeightPart(source, rows, (0, columns_in)),))


def row_shard(name: str, source: str, out: int, columns_in: int, tp: int, rank: int,
              size_name: str = "in") -> WeightShard:
    """RowParallelLinear's rank: columns ``block(in)`` of ``source``, every row; the whole bias on rank 0 only
    (TP-4.2). ``size_name`` names the input size in a refusal (``in``, ``ffn``)."""
    columns = block(columns_in, tp, rank, f"{size_name}={columns_in}")
    bias = (0, out) if rank == 0 else None
    return WeightShard(name, (out, _rows(columns)), (WeightPart(source, (0, out), columns),), bias)


def merged_column_shard(name: str, sources: tuple[str, ...], out: int, columns_in: int, tp: int, rank: int,
                        size_name: str = "ffn") -> WeightShard:
    """MergedColumnParallelLinear's rank: rows ``block(out)`` of each source (each ``[out, in]``), stacked in order
    (TP-4.4)."""
    rows = block(out, tp, rank, f"{size_name}={out}")
    return WeightShard(name, (len(sources) * _rows(rows), columns_in),
                       tuple(WeightPart(source, rows, (0, columns_in)) for source in sources))


def qkv_shard(name: str, sources: tuple[str, str, str], hidden: int, num_heads: int, num_kv_heads: int, head_dim: int,
              tp: int, rank: int) -> WeightShard:
    """QKVParallelLinear's rank: its query heads' rows of the q source, KV shard ``rank // replicas``'s rows of the
    k and v sources, stacked q, k, v (TP-4.3); its bias takes the same rows."""
    layout = head_layout(num_heads, num_kv_heads, tp)
    q_rows = layout.heads_per_rank * head_dim
    kv_rows = layout.kv_heads_per_rank * head_dim
    kv_shard = layout.kv_shard(rank)
    whole = (0, hidden)
    q, k, v = sources
    return WeightShard(name, (q_rows + 2 * kv_rows, hidden), (
        WeightPart(q, _column(rank, q_rows), whole),
        WeightPart(k, _column(kv_shard, kv_rows), whole),
        WeightPart(v, _column(kv_shard, kv_rows), whole)))


def vocab_ranges(vocab: int, tp: int, rank: int) -> tuple[Span, Span]:
    """(the rank's padded vocabulary range, the checkpoint rows it loads) of VocabParallelEmbedding (TP-4.5):
    ``padded/tp`` ids each, the loaded ones clipped to the vocabulary."""
    padded = pad_vocab(vocab)
    per_rank = divide(padded, tp, f"the padded vocab {padded} (vocab={vocab} padded to a multiple of {VOCAB_PADDING})")
    vocab_range = _column(rank, per_rank)
    return vocab_range, (min(vocab_range[0], vocab), min(vocab_range[1], vocab))


def vocab_shard(name: str, source: str, vocab: int, hidden: int, tp: int, rank: int) -> WeightShard:
    """VocabParallelEmbedding's or ParallelLMHead's rank: the checkpoint rows it loads of ``source``, then zero
    padding rows up to ``padded/tp`` (TP-4.5, TP-4.6)."""
    vocab_range, loaded = vocab_ranges(vocab, tp, rank)
    per_rank = _rows(vocab_range)
    return WeightShard(name, (per_rank, hidden), (WeightPart(source, loaded, (0, hidden)),), None,
                       per_rank - _rows(loaded))


def _column(lo: int, size: int) -> Span:
    return (lo * size, (lo + 1) * size)


def _rank_shards(geometry: ModelGeometry, tp: int, rank: int) -> RankShards:
    """Rank ``rank``'s slices of every weight (TP-4.1 to TP-4.6), each layer's as its layer cuts it."""
    g = geometry
    qkv = qkv_shard("qkv_proj", ("q_proj", "k_proj", "v_proj"), g.hidden, g.num_heads, g.num_kv_heads, g.head_dim,
                    tp, rank)
    o_proj = row_shard("o_proj", "o_proj", g.hidden, g.num_heads * g.head_dim, tp, rank)
    gate_up = merged_column_shard("gate_up_proj", ("gate_proj", "up_proj"), g.ffn, g.hidden, tp, rank)
    down = row_shard("down_proj", "down_proj", g.hidden, g.ffn, tp, rank, size_name="ffn")
    embed = vocab_shard("embed_tokens", "embed_tokens", g.vocab, g.hidden, tp, rank)
    head_source = "embed_tokens" if g.tie_word_embeddings else "lm_head"
    lm_head = vocab_shard("lm_head", head_source, g.vocab, g.hidden, tp, rank)
    vocab_range, loaded = vocab_ranges(g.vocab, tp, rank)
    kv_shard = head_layout(g.num_heads, g.num_kv_heads, tp).kv_shard(rank)
    return RankShards(rank, kv_shard, vocab_range, loaded, (qkv, o_proj, gate_up, down, embed, lm_head))


def shard_plan(geometry: ModelGeometry, tp: int) -> ShardPlan:
    """Every rank's shards of ``geometry`` at ``tp`` ranks (TP-4.7); ValueError for a geometry vLLM cannot shard,
    naming the numbers (TP-4.8), checked in the order query heads, KV heads, ffn, padded vocabulary."""
    check_int("", "tp", tp, minimum=1)
    layout = head_layout(geometry.num_heads, geometry.num_kv_heads, tp)
    divide(geometry.ffn, tp, f"ffn={geometry.ffn}")
    vocab_ranges(geometry.vocab, tp, 0)
    return ShardPlan(tp, pad_vocab(geometry.vocab), layout.heads_per_rank, layout.kv_heads_per_rank,
                     layout.kv_replicas, tuple(_rank_shards(geometry, tp, rank) for rank in range(tp)))


def shard_plan_of(geometry: Mapping[str, Any], tp: int) -> dict[str, Any]:
    """The tp-shard-plan operation: ``shard_plan(ModelGeometry.from_mapping(geometry), tp)`` as plain data."""
    return shard_plan(ModelGeometry.from_mapping(geometry), tp).as_plain()
