"""Judge-side strategies of the per-rank TP-W2 gates (w2_ranks.yaml; spec/tensor-parallel.md TP-5.7): the layer
gates' own drawing (strategies_w2.py: geometry, dtype, seed, numpy arrays through PCG64) with tp in {1, 2, 3, 4, 8},
wrapped as tp-layer-ranks' {layer, inputs, tp}.

The vocabulary layers draw a padded vocabulary that tp divides (at tp 3 only 192 of the sizes drawn), and their ids
hold every rank's first and last loaded id. The row and MLP layers draw float32 only, as their reduced gates do.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

from . import strategies_w2 as w2

TPS = (1, 2, 3, 4, 8)
VOCAB_BLOCKS = 5
"""Vocabularies of at most 5 x 64 ids, as the layer gates' 300."""

Example = dict[str, Any]


def _ranks(layer: str, body: Callable[[Any, Any, int], Example], dtypes: tuple[str, ...]) -> st.SearchStrategy[Example]:
    """tp-layer-ranks' input for ``layer``, its inputs drawn by the layer operation's ``body`` (tp taken out)."""
    def as_ranks(example: Example) -> Example:
        inputs = dict(example)
        return {"layer": layer, "inputs": inputs, "tp": inputs.pop("tp")}

    return w2._example(body, dtypes, TPS).map(as_ranks)


def _vocab(draw: Any, tp: int) -> int:
    """A vocabulary whose padded size tp divides."""
    blocks = draw(st.sampled_from([b for b in range(1, VOCAB_BLOCKS + 1) if b * w2.VOCAB_PADDING % tp == 0]))
    return draw(st.integers((blocks - 1) * w2.VOCAB_PADDING + 1, blocks * w2.VOCAB_PADDING))


def _embedding(draw: Any, arrays: Any, tp: int) -> Example:
    vocab, hidden = _vocab(draw, tp), draw(st.integers(1, 16))
    drawn = draw(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=6))
    ids = np.array(w2._range_ends(vocab, tp) + drawn, dtype=np.int64)
    return {"ids": ids, "weight": arrays.normal((vocab, hidden)), "tp": tp}


def _lm_head(draw: Any, arrays: Any, tp: int) -> Example:
    vocab, hidden, tokens = _vocab(draw, tp), draw(st.integers(1, 32)), draw(st.integers(1, 4))
    return {"hidden_states": arrays.normal((tokens, hidden)), "weight": arrays.weight(vocab, hidden), "tp": tp}


def column() -> st.SearchStrategy[Example]:
    return _ranks("column", w2._column, ("float32", "bfloat16"))


def row() -> st.SearchStrategy[Example]:
    return _ranks("row", w2._row, ("float32",))


def qkv() -> st.SearchStrategy[Example]:
    return _ranks("qkv", w2._qkv, ("float32", "bfloat16"))


def mlp() -> st.SearchStrategy[Example]:
    return _ranks("mlp", w2._mlp, ("float32",))


def embedding() -> st.SearchStrategy[Example]:
    return _ranks("embedding", _embedding, ("float32", "bfloat16"))


def lm_head() -> st.SearchStrategy[Example]:
    return _ranks("lm_head", _lm_head, ("float32", "bfloat16"))
