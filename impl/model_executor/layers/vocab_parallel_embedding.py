"""The vocab-parallel embedding and LM head of vLLM 0.33.0 as one rank holds and runs them (spec/tensor-parallel.md
TP-4.5, TP-4.6, TP-5.3, TP-5.4; vllm/model_executor/layers/vocab_parallel_embedding.py, logits_processor.py)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from impl.distributed import communication_op
from impl.distributed.shard_plan import VOCAB_PADDING, divide, pad_vocab


@dataclass(frozen=True)
class VocabShard:
    """A rank's ``padded/tp`` rows of the vocabulary: its padded range and the checkpoint rows it loads (TP-4.5)."""

    start: int
    end: int
    loaded_end: int

    @classmethod
    def of(cls, vocab: int, tp: int, rank: int) -> "VocabShard":
        padded = pad_vocab(vocab)
        per_rank = divide(padded, tp, f"the padded vocab {padded} (vocab={vocab} padded to a multiple of {VOCAB_PADDING})")
        start = rank * per_rank
        return cls(start, start + per_rank, min(start + per_rank, vocab))

    def rows(self, weight: torch.Tensor) -> torch.Tensor:
        """The rank's ``padded/tp`` weight rows: checkpoint rows ``[start, loaded_end)``, then zero rows (TP-4.5)."""
        shard = weight.new_zeros((self.end - self.start, weight.shape[1]))
        loaded = max(0, self.loaded_end - self.start)
        shard[:loaded] = weight[self.start:self.start + loaded]
        return shard


@dataclass(frozen=True)
class VocabParallelEmbedding:
    """An embedding's rank: its vocab shard's rows (TP-4.5)."""

    weight: torch.Tensor
    vocab: VocabShard

    @classmethod
    def shard(cls, weight: torch.Tensor, rank: int, tp: int) -> "VocabParallelEmbedding":
        vocab = VocabShard.of(weight.shape[0], tp, rank)
        return cls(vocab.rows(weight), vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Ids outside the rank's loaded range read row 0 and are zeroed; the ranks' rows all-reduced (TP-5.3)."""
        outside = (ids < self.vocab.start) | (ids >= self.vocab.loaded_end)
        local = torch.where(outside, torch.zeros_like(ids), ids - self.vocab.start)
        rows = F.embedding(local, self.weight)
        return communication_op.all_reduce(rows.masked_fill(outside.unsqueeze(-1), 0))


@dataclass(frozen=True)
class ParallelLMHead:
    """An LM head's rank: the same vocab shard as the embedding, its own (or the tied embedding's) rows (TP-4.6)."""

    weight: torch.Tensor
    vocab_size: int

    @classmethod
    def shard(cls, weight: torch.Tensor, rank: int, tp: int) -> "ParallelLMHead":
        return cls(VocabShard.of(weight.shape[0], tp, rank).rows(weight), weight.shape[0])

    def logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Every rank's ``[tokens, padded/tp]`` logits all-gathered in rank order, trimmed to the vocabulary (TP-5.4)."""
        gathered = communication_op.all_gather(F.linear(hidden_states, self.weight), dim=-1)
        return gathered[..., :self.vocab_size]
