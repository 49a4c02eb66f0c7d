"""Judge-side strategies of the TP-W2 layer gates (w2_layers.yaml; issue 30 item 3): a geometry, a dtype, a tp in
{1, 2, 4, 8} and a seed drawn by hypothesis, mapped to numpy arrays (bfloat16 through ml_dtypes) with
``numpy.random.Generator(PCG64(seed))``, so the Python and the C++ port receive the same tensors.

Sizes stay small so that the gates stay fast; weights are scaled by 1/sqrt(in) so every output is of order one.
Only shardable geometries are drawn: the refusals are named cases.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

TPS = (1, 2, 4, 8)
DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}
VOCAB_PADDING = 64

Example = dict[str, Any]


class _Arrays:
    """Normal tensors of one example, each from its own stream of the example's seed."""

    def __init__(self, seed: int, dtype: str):
        self.seed, self.dtype, self.stream = seed, DTYPES[dtype], 0

    def normal(self, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
        self.stream += 1
        rng = np.random.Generator(np.random.PCG64([self.seed, self.stream]))
        return (scale * rng.standard_normal(shape)).astype(self.dtype)

    def weight(self, out: int, inputs: int) -> np.ndarray:
        return self.normal((out, inputs), 1.0 / math.sqrt(inputs))


def _example(body: Callable[[Any, _Arrays, int], Example], dtypes: tuple[str, ...],
             tps: tuple[int, ...] = TPS) -> st.SearchStrategy[Example]:
    @st.composite
    def draw_example(draw: Any) -> Example:
        tp = draw(st.sampled_from(tps))
        arrays = _Arrays(draw(st.integers(0, 2**32 - 1)), draw(st.sampled_from(dtypes)))
        return body(draw, arrays, tp)

    return draw_example()


def _column(draw: Any, arrays: _Arrays, tp: int) -> Example:
    tokens, inputs, out = draw(st.integers(1, 4)), draw(st.integers(1, 32)), tp * draw(st.integers(1, 6))
    bias = arrays.normal((out,)) if draw(st.booleans()) else None
    return {"x": arrays.normal((tokens, inputs)), "weight": arrays.weight(out, inputs), "bias": bias, "tp": tp,
            "gather_output": draw(st.booleans())}


def _row(draw: Any, arrays: _Arrays, tp: int, tokens: int | None = None, out: int | None = None) -> Example:
    tokens = tokens or draw(st.integers(1, 4))
    inputs, out = tp * draw(st.integers(1, 6)), out or draw(st.integers(1, 32))
    bias = arrays.normal((out,)) if draw(st.booleans()) else None
    return {"x": arrays.normal((tokens, inputs)), "weight": arrays.weight(out, inputs), "bias": bias, "tp": tp}


def _row_bfloat16(draw: Any, arrays: _Arrays, tp: int) -> Example:
    """At least 512 outputs, so that the NMSE of rounding is an average over many elements."""
    return _row(draw, arrays, tp, tokens=16, out=draw(st.sampled_from([32, 48, 64])))


def _qkv(draw: Any, arrays: _Arrays, tp: int) -> Example:
    kv = draw(st.sampled_from([d for d in range(1, tp + 1) if tp % d == 0]) | st.integers(1, 2).map(lambda k: k * tp))
    heads = math.lcm(tp, kv) * draw(st.integers(1, 2))
    head_dim, hidden, tokens = draw(st.integers(1, 6)), draw(st.integers(1, 32)), draw(st.integers(1, 4))
    sizes = (heads * head_dim, kv * head_dim, kv * head_dim)
    example = {"x": arrays.normal((tokens, hidden))}
    example.update({f"{name}_weight": arrays.weight(size, hidden) for name, size in zip("qkv", sizes)})
    with_bias = draw(st.booleans())
    example.update({f"{name}_bias": arrays.normal((size,)) if with_bias else None for name, size in zip("qkv", sizes)})
    return {**example, "num_heads": heads, "num_kv_heads": kv, "head_dim": head_dim, "tp": tp}


def _mlp(draw: Any, arrays: _Arrays, tp: int, tokens: int | None = None, hidden: int | None = None,
         least_per_rank: int = 1) -> Example:
    tokens, hidden = tokens or draw(st.integers(1, 4)), hidden or draw(st.integers(1, 32))
    ffn = tp * draw(st.integers(least_per_rank, max(8, least_per_rank)))
    return {"x": arrays.normal((tokens, hidden)), "gate_weight": arrays.weight(ffn, hidden),
            "up_weight": arrays.weight(ffn, hidden), "down_weight": arrays.weight(hidden, ffn), "tp": tp}


def _mlp_bfloat16(draw: Any, arrays: _Arrays, tp: int) -> Example:
    """At least 1024 outputs, each a sum over at least 16 intermediate units, so that the NMSE of rounding is an average
    over many roundings (an example with 8 units had 1.4 times the mean)."""
    return _mlp(draw, arrays, tp, tokens=32, hidden=draw(st.sampled_from([32, 48, 64])), least_per_rank=max(1, 16 // tp))


def _range_ends(vocab: int, tp: int) -> list[int]:
    """Each rank's first and last loaded id: where an off-by-one mask shows."""
    per_rank = -(-vocab // VOCAB_PADDING) * VOCAB_PADDING // tp
    ends = set()
    for rank in range(tp):
        start, end = rank * per_rank, min((rank + 1) * per_rank, vocab)
        if start < end:
            ends.update({start, end - 1})
    return sorted(ends)


def _embedding(draw: Any, arrays: _Arrays, tp: int) -> Example:
    vocab, hidden = draw(st.integers(1, 300)), draw(st.integers(1, 16))
    drawn = draw(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=6))
    ids = np.array(_range_ends(vocab, tp) + drawn, dtype=np.int64)
    return {"ids": ids, "weight": arrays.normal((vocab, hidden)), "tp": tp}


def _lm_head(draw: Any, arrays: _Arrays, tp: int) -> Example:
    vocab, hidden, tokens = draw(st.integers(1, 300)), draw(st.integers(1, 32)), draw(st.integers(1, 4))
    return {"hidden_states": arrays.normal((tokens, hidden)), "weight": arrays.weight(vocab, hidden), "tp": tp}


def column_linear() -> st.SearchStrategy[Example]:
    return _example(_column, ("float32", "bfloat16"))


def row_linear() -> st.SearchStrategy[Example]:
    """float32 at every tp; bfloat16 at tp 1 only (one rounding: tp-row-linear-bfloat16 judges the reduced ones)."""
    return st.one_of(_example(_row, ("float32",)), _example(_row, ("bfloat16",), (1,)))


def row_linear_bfloat16() -> st.SearchStrategy[Example]:
    return _example(_row_bfloat16, ("bfloat16",), (2, 4, 8))


def qkv_linear() -> st.SearchStrategy[Example]:
    return _example(_qkv, ("float32", "bfloat16"))


def mlp() -> st.SearchStrategy[Example]:
    return _example(_mlp, ("float32",))


def mlp_bfloat16() -> st.SearchStrategy[Example]:
    return _example(_mlp_bfloat16, ("bfloat16",))


def vocab_embedding() -> st.SearchStrategy[Example]:
    return _example(_embedding, ("float32", "bfloat16"))


def lm_head() -> st.SearchStrategy[Example]:
    return _example(_lm_head, ("float32", "bfloat16"))
