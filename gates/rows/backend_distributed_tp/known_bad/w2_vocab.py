"""Known-bad TP-W2 vocab-parallel layers (issue 30 item 4): the impl's operations with one rank-side defect each."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from impl.distributed import communication_op
from impl.distributed.gloo_world import run_on_ranks
from impl.model_executor.layers import tp_operations as ops
from impl.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding

Payload = dict[str, Any]


def _mask_one_short_rank(rank: int, tp: int, p: Payload) -> torch.Tensor:
    """The rank's loaded range taken to end one id early: its last id counts as outside and is zeroed everywhere."""
    layer = VocabParallelEmbedding.shard(p["weight"], rank, tp)
    ids, vocab = p["ids"], layer.vocab
    outside = (ids < vocab.start) | (ids >= vocab.loaded_end - 1)
    rows = F.embedding(torch.where(outside, torch.zeros_like(ids), ids - vocab.start), layer.weight)
    return communication_op.all_reduce(rows.masked_fill(outside.unsqueeze(-1), 0))


def mask_end_off_by_one(ids: Any, weight: Any, tp: Any) -> list[torch.Tensor]:
    """The vocab mask off by one at the range end (TP-5.3)."""
    return run_on_ranks(tp, _mask_one_short_rank, ops.embedding_payload(ids, weight, tp))


def _reversed_gather_rank(rank: int, tp: int, p: Payload) -> torch.Tensor:
    head = ParallelLMHead.shard(p["weight"], rank, tp)
    gathered = communication_op.all_gather(F.linear(p["hidden_states"], head.weight), dim=-1)
    blocks = gathered.chunk(tp, dim=-1)[::-1]
    return torch.cat(blocks, dim=-1)[..., :head.vocab_size]


def logits_gathered_reversed(hidden_states: Any, weight: Any, tp: Any) -> list[torch.Tensor]:
    """The ranks' logits concatenated in reverse rank order (TP-5.4)."""
    return run_on_ranks(tp, _reversed_gather_rank, ops.lm_head_payload(hidden_states, weight, tp))


def _untrimmed_rank(rank: int, tp: int, p: Payload) -> torch.Tensor:
    head = ParallelLMHead.shard(p["weight"], rank, tp)
    return communication_op.all_gather(F.linear(p["hidden_states"], head.weight), dim=-1)


def padding_not_trimmed(hidden_states: Any, weight: Any, tp: Any) -> list[torch.Tensor]:
    """The gathered logits keep the padded columns [vocab, padded) (TP-5.4)."""
    return run_on_ranks(tp, _untrimmed_rank, ops.lm_head_payload(hidden_states, weight, tp))
