"""Known-bad whole models for model-greedy-drawn's refusals (w2_model.yaml; spec/tensor-parallel.md TP-4.8): the impl with a
shard-plan check a port tends to get wrong, so that it decodes (or crashes) where vLLM refuses the geometry.

Each defect replaces a function of impl.distributed.shard_plan for one call, in the judge's process (whose input check
asks the plan) and inside the rank processes (whose layers cut by it), and undoes it after: a gloo world is reused
from call to call, and the correct impl may run on it next.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Callable

import torch

from impl.distributed import shard_plan
from impl.model_executor.models import qwen3

from .model import _replaced

Patch = Callable[[int], contextlib.AbstractContextManager[None]]


def _vocab_padded_for_tp(tp: int) -> contextlib.AbstractContextManager[None]:
    """The vocabulary padded to a multiple of lcm(64, tp) instead of 64: every tp divides it, so the padded-vocabulary
    refusal never fires (vLLM pads to 64 and refuses)."""
    step = math.lcm(shard_plan.VOCAB_PADDING, tp)
    return _replaced("pad_vocab", lambda vocab, pad_to=shard_plan.VOCAB_PADDING: -(-vocab // step) * step, shard_plan)


def _shares_floored(tp: int) -> contextlib.AbstractContextManager[None]:
    """``size // tp`` without the divisibility check: heads, ffn or vocabulary shares silently truncated (vLLM's
    divide asserts)."""
    return _replaced("divide", lambda size, tp, what: size // tp, shard_plan)


def _rank_with(patch: Patch, rank: int, tp: int, run: Any) -> Any:
    with patch(tp):
        return qwen3.rank_greedy(rank, tp, run)


def _rank_vocab_padded_for_tp(rank: int, tp: int, run: Any) -> Any:
    return _rank_with(_vocab_padded_for_tp, rank, tp, run)


def _rank_shares_floored(rank: int, tp: int, run: Any) -> Any:
    return _rank_with(_shares_floored, rank, tp, run)


def vocab_padded_for_tp(config: Any, weights: Any, prompt: Any, steps: int, tp: int) -> dict[str, torch.Tensor]:
    """tp-model-greedy padding the vocabulary to a multiple of every tp (module-level rank functions pickle by name)."""
    with _vocab_padded_for_tp(tp):
        return qwen3.run_greedy(config, weights, prompt, steps, tp, _rank_vocab_padded_for_tp)


def shares_floored(config: Any, weights: Any, prompt: Any, steps: int, tp: int) -> dict[str, torch.Tensor]:
    """tp-model-greedy cutting every share with floor division, unchecked."""
    with _shares_floored(tp):
        return qwen3.run_greedy(config, weights, prompt, steps, tp, _rank_shares_floored)
