"""The vocab-parallel embedding and LM head of vLLM 0.33.0 as one rank holds and runs them (spec/tensor-parallel.md
TP-4.5, TP-4.6, TP-5.3, TP-5.4; vllm/model_executor/layers/vocab_parallel_embedding.py, logits_processor.py).

The shard plan's ``vocab_ranges`` and ``vocab_shard`` (impl/distributed/shard_plan.py) say which ids a rank holds;
each layer keeps the ``WeightShard`` it was cut by. ``partial`` is the rank's output before its collective."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from impl.distributed import communication_op
from impl.distributed.shard_plan import WeightShard, vocab_ranges, vocab_shard
from impl.model_executor.layers.linear import cut


@dataclass(frozen=True)
class VocabShard:
    """A rank's ``padded/tp`` ids of the vocabulary: its padded range and the end of the checkpoint rows it loads
    (TP-4.5)."""

    start: int
    end: int
    loaded_end: int

    @classmethod
    def of(cls, vocab: int, tp: int, rank: int) -> "VocabShard":
        """The shard plan's ranges of rank ``rank``; ValueError when tp does not divide the padded vocabulary."""
        (start, end), (_, loaded_end) = vocab_ranges(vocab, tp, rank)
        return cls(start, end, loaded_end)


@dataclass(frozen=True)
class VocabParallelEmbedding:
    """An embedding's rank: its vocab shard's rows, checkpoint rows then zero padding (TP-4.5)."""

    weight: torch.Tensor
    vocab: VocabShard
    weight_shard: WeightShard

    @classmethod
    def shard(cls, weight: torch.Tensor, rank: int, tp: int) -> "VocabParallelEmbedding":
        plan = vocab_shard("weight", "weight", weight.shape[0], weight.shape[1], tp, rank)
        return cls(cut(plan, {"weight": weight}), VocabShard.of(weight.shape[0], tp, rank), plan)

    def mask(self, ids: torch.Tensor) -> torch.Tensor:
        """True where the id is inside the rank's loaded range [start, loaded_end) (TP-5.3)."""
        return (ids >= self.vocab.start) & (ids < self.vocab.loaded_end)

    def partial(self, ids: torch.Tensor) -> torch.Tensor:
        """The rank's rows [tokens, hidden] of the ids: an id outside its loaded range reads row 0 and is zeroed."""
        inside = self.mask(ids)
        rows = F.embedding(torch.where(inside, ids - self.vocab.start, torch.zeros_like(ids)), self.weight)
        return rows.masked_fill(~inside.unsqueeze(-1), 0)

    def collective(self, partial: torch.Tensor) -> torch.Tensor:
        """The ranks' rows all-reduced: each id's row from the one rank that holds it (TP-5.3)."""
        return communication_op.all_reduce(partial)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.collective(self.partial(ids))


@dataclass(frozen=True)
class ParallelLMHead:
    """An LM head's rank: the same vocab shard as the embedding, its own (or the tied embedding's) rows (TP-4.6)."""

    weight: torch.Tensor
    vocab_size: int
    weight_shard: WeightShard

    @classmethod
    def shard(cls, weight: torch.Tensor, rank: int, tp: int) -> "ParallelLMHead":
        plan = vocab_shard("weight", "weight", weight.shape[0], weight.shape[1], tp, rank)
        return cls(cut(plan, {"weight": weight}), weight.shape[0], plan)

    def partial(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """The rank's logits [tokens, padded/tp] (its padding rows' logits zero)."""
        return F.linear(hidden_states, self.weight)

    def collective(self, partial: torch.Tensor) -> torch.Tensor:
        """Every rank's logits all-gathered in rank order, trimmed to the vocabulary (TP-5.4)."""
        return communication_op.all_gather(partial, dim=-1)[..., :self.vocab_size]

    def logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """The logits [tokens, vocab] of ``hidden_states`` (TP-5.4)."""
        return self.collective(self.partial(hidden_states))
