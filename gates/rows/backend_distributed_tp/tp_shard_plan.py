"""The tp-shard-plan operation's helpers (spec/tensor-parallel.md TP-4.1 to TP-4.8): the strategy of geometries and
the known-bad plans, each the impl's plan with one defect a TP-W2 port tends to have (issue 30, items 2 and 4).

The judge imports this module for its strategy: the impl is imported only inside the worker-side functions.
"""
from __future__ import annotations

from math import lcm
from typing import Any, Callable, Mapping

from hypothesis import strategies as st

Plan = dict[str, Any]
TPS = (1, 2, 3, 4, 6, 8, 16)


@st.composite
def _shardable(draw: Any, vocab_fits: bool = False) -> dict[str, Any]:
    """A geometry and tp that are valid (the KV heads divide tp or tp divides them, the query heads both), but for
    the vocabulary unless ``vocab_fits``: its padded size may be one tp (3, 6) does not divide."""
    tp = draw(st.sampled_from(TPS))
    divisors = [d for d in range(1, tp + 1) if tp % d == 0]
    kv = draw(st.sampled_from(divisors) | st.integers(1, 4).map(lambda k: k * tp))
    heads = lcm(tp, kv) * draw(st.integers(1, 3))
    if vocab_fits:  # just under a multiple of lcm(64, tp), so that it pads to that multiple
        vocab = lcm(64, tp) * draw(st.integers(1, 8)) - draw(st.integers(0, 63))
    else:
        vocab = draw(st.integers(1, 3000))
    geometry = {"hidden": draw(st.integers(1, 96)), "num_heads": heads, "num_kv_heads": kv,
                "head_dim": draw(st.integers(1, 16)), "ffn": tp * draw(st.integers(1, 24)),
                "vocab": vocab, "tie_word_embeddings": draw(st.booleans())}
    return {"geometry": geometry, "tp": tp}


@st.composite
def _any(draw: Any) -> dict[str, Any]:
    """Any small sizes, mostly ones vLLM refuses to shard."""
    small = st.integers(1, 12)
    geometry = {"hidden": draw(small), "num_heads": draw(small), "num_kv_heads": draw(small), "head_dim": draw(small),
                "ffn": draw(small), "vocab": draw(st.integers(1, 200)), "tie_word_embeddings": draw(st.booleans())}
    return {"geometry": geometry, "tp": draw(st.sampled_from(TPS))}


_KINDS = ("shardable",) * 7 + ("any vocabulary", "any sizes", "any sizes")


def strategy() -> st.SearchStrategy[dict[str, Any]]:
    """``{geometry, tp}``: shardable seven times in ten; a shardable one but for its vocabulary (refused where tp is 3
    or 6 and does not divide the padded size) once; any small sizes, mostly refused, twice. A property's examples
    must compare a value on at least 60% of them (min_value_share), on every seed: a vocabulary drawn freely in all
    shardable draws left ~56% on some seeds."""
    choose = {"shardable": lambda: _shardable(vocab_fits=True), "any vocabulary": _shardable, "any sizes": _any}
    return st.sampled_from(_KINDS).flatmap(lambda kind: choose[kind]())


def upstream_strategy() -> st.SearchStrategy[dict[str, Any]]:
    """Shardable ``{geometry, tp}`` only, nine in ten (each example builds vLLM's layers tp times), else any."""
    return st.integers(0, 9).flatmap(lambda pick: _any() if pick == 9 else _shardable(vocab_fits=True))


# Known-bad plans ---------------------------------------------------------------------------------------------------


def _plan(geometry: Mapping[str, Any], tp: int) -> Plan:
    from impl.distributed.shard_plan import shard_plan_of

    return shard_plan_of(geometry, tp)


def _each_weight(plan: Plan, change: Callable[[int, str, dict[str, Any]], None]) -> Plan:
    """``plan`` after ``change(rank, name, weight)`` on every rank's every weight."""
    for rank in plan["ranks"]:
        for name, weight in rank["weights"].items():
            change(rank["rank"], name, weight)
    return plan


def kv_shard_by_rank(geometry: Mapping[str, Any], tp: int) -> Plan:
    """Each rank loads K/V shard ``rank`` instead of ``rank // replicas``: with replicated KV heads it reads rows past
    the checkpoint's (TP-4.3)."""
    plan = _plan(geometry, tp)

    def change(rank: int, name: str, weight: dict[str, Any]) -> None:
        if name == "qkv_proj":
            size = plan["kv_heads_per_rank"] * geometry["head_dim"]
            for part in weight["parts"][1:]:
                part["rows"] = [rank * size, (rank + 1) * size]

    for rank in plan["ranks"]:
        rank["kv_shard"] = rank["rank"]
    return _each_weight(plan, change)


def kv_heads_floor_divided(geometry: Mapping[str, Any], tp: int) -> Plan:
    """Hkv // tp KV heads a rank, without vLLM's max(1, .): none at all when tp exceeds Hkv (TP-4.3)."""
    plan = _plan(geometry, tp)
    if tp <= geometry["num_kv_heads"]:
        return plan
    plan["kv_heads_per_rank"] = 0

    def change(rank: int, name: str, weight: dict[str, Any]) -> None:
        if name == "qkv_proj":
            for part in weight["parts"][1:]:
                part["rows"] = [0, 0]
            weight["shape"][0] = weight["parts"][0]["rows"][1] - weight["parts"][0]["rows"][0]

    return _each_weight(plan, change)


def bias_on_every_rank(geometry: Mapping[str, Any], tp: int) -> Plan:
    """The row-parallel layers' bias added on every rank, so the all-reduce counts it tp times (TP-4.2)."""
    def change(rank: int, name: str, weight: dict[str, Any]) -> None:
        if name in ("o_proj", "down_proj"):
            weight["bias"] = [0, geometry["hidden"]]

    return _each_weight(_plan(geometry, tp), change)


def row_layers_split_rows(geometry: Mapping[str, Any], tp: int) -> Plan:
    """o_proj and down_proj sharded along the output dim, as column layers, instead of the input dim (TP-4.2)."""
    hidden = geometry["hidden"]
    if hidden % tp:
        raise ValueError(f"hidden={hidden} is not divisible by tp={tp}")

    def change(rank: int, name: str, weight: dict[str, Any]) -> None:
        if name in ("o_proj", "down_proj"):
            part = weight["parts"][0]
            inputs = part["cols"]
            part["cols"] = [0, weight["shape"][1] * tp]
            part["rows"] = [rank * hidden // tp, (rank + 1) * hidden // tp]
            weight["shape"] = [hidden // tp, (inputs[1] - inputs[0]) * tp]

    return _each_weight(_plan(geometry, tp), change)


def _vocab_padded_to(geometry: Mapping[str, Any], tp: int, padded: int) -> Plan:
    """The impl's plan with its vocabulary split as if padded to ``padded`` ids."""
    plan = _plan(geometry, tp)
    vocab = geometry["vocab"]
    if padded % tp:
        raise ValueError(f"the padded vocab {padded} is not divisible by tp={tp}")
    per_rank = padded // tp
    plan["padded_vocab"] = padded
    for rank in plan["ranks"]:
        start, end = rank["rank"] * per_rank, (rank["rank"] + 1) * per_rank
        loaded = [min(start, vocab), min(end, vocab)]
        rank["vocab_range"], rank["vocab_loaded"] = [start, end], loaded
        for name in ("embed_tokens", "lm_head"):
            weight = rank["weights"][name]
            weight["shape"][0] = per_rank
            weight["parts"][0]["rows"] = loaded
            weight["padding_rows"] = per_rank - (loaded[1] - loaded[0])
    return plan


def vocab_padded_to_32(geometry: Mapping[str, Any], tp: int) -> Plan:
    """The vocabulary padded to a multiple of 32, not vLLM's 64 (TP-4.5)."""
    return _vocab_padded_to(geometry, tp, -(-geometry["vocab"] // 32) * 32)


def vocab_not_padded(geometry: Mapping[str, Any], tp: int) -> Plan:
    """The vocabulary split unpadded (TP-4.5)."""
    return _vocab_padded_to(geometry, tp, geometry["vocab"])


def vocab_loaded_end_off_by_one(geometry: Mapping[str, Any], tp: int) -> Plan:
    """Each rank's loaded ids clipped to ``vocab - 1``, as if the last id were an inclusive end: the last token is
    never loaded (TP-4.5)."""
    plan = _plan(geometry, tp)
    last = geometry["vocab"] - 1
    for rank in plan["ranks"]:
        start, end = rank["vocab_loaded"]
        loaded = [min(start, last), min(end, last)]
        rank["vocab_loaded"] = loaded
        for name in ("embed_tokens", "lm_head"):
            weight = rank["weights"][name]
            weight["parts"][0]["rows"] = loaded
            weight["padding_rows"] = weight["shape"][0] - (loaded[1] - loaded[0])
    return plan


def tied_head_reads_lm_head(geometry: Mapping[str, Any], tp: int) -> Plan:
    """With tie_word_embeddings, lm_head loaded from a checkpoint lm_head tensor instead of sharing embed_tokens
    (TP-4.6)."""
    def change(rank: int, name: str, weight: dict[str, Any]) -> None:
        if name == "lm_head":
            weight["parts"][0]["source"] = "lm_head"

    return _each_weight(_plan(geometry, tp), change)


def gate_up_split_as_one(geometry: Mapping[str, Any], tp: int) -> Plan:
    """gate_up_proj cut as one [2·ffn] column layer: rank r gets rows [r·2f, (r+1)·2f) of the stacked gate/up, so the
    first ranks hold only gate rows (TP-4.4)."""
    ffn = geometry["ffn"]

    def change(rank: int, name: str, weight: dict[str, Any]) -> None:
        if name == "gate_up_proj":
            size = 2 * ffn // tp
            start, end = rank * size, (rank + 1) * size
            parts = []
            if start < ffn:
                parts.append({"source": "gate_proj", "rows": [start, min(end, ffn)], "cols": weight["parts"][0]["cols"]})
            if end > ffn:
                parts.append({"source": "up_proj", "rows": [max(start, ffn) - ffn, end - ffn], "cols": weight["parts"][0]["cols"]})
            weight["parts"] = parts

    return _each_weight(_plan(geometry, tp), change)
