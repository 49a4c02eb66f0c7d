"""The per-rank TP-W2 gates (w2_ranks.yaml; spec/tensor-parallel.md TP-5.7): each known-bad of known_bad/w2_ranks.py
passes its reduced layer gate (every named case and drawn examples, under the gate's own comparison) and is rejected
by its per-rank gate, the report naming the rank, the tensor and both ranges; the oracle's own checks (refusals,
ranges against the shard-plan oracle, partials against the unsharded layer oracle, one rounding)."""
from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings

from _vllm_gates.definitions.gatefile import load_gate_file
from _vllm_gates.definitions.model import Gate, TargetRef
from _vllm_gates.values.policies import Policy
from _vllm_gates.values.tolerance import compare_under
from _vllm_gates.values.tolerance_report import how_far_off
from gates.rows.backend_distributed_tp.build_w2 import torch_inputs
from gates.rows.backend_distributed_tp.known_bad import w2_ranks as bad
from oracles import tp_layers
from oracles.shard_plan import vllm_shard_plan
from oracles.tp_rank_state import layer_ranks

pytestmark = [pytest.mark.cpu, pytest.mark.dist]

REPO = Path(__file__).resolve().parents[2]
ROW = REPO / "gates/rows/backend_distributed_tp/gate.yaml"
DRAWN = 12  # examples of each reduced gate's strategy a known-bad is run on, beside its named cases


def _gates() -> dict[str, Gate]:
    loaded = load_gate_file(ROW, REPO, None, ("cpu", "dist", "gpu", "upstream"), parity_marker="upstream")
    return {gate.id: gate for gate in loaded.gates}


GATES = _gates()


def _resolve(target: TargetRef) -> Any:
    return getattr(importlib.import_module(target.module), target.attribute)


def _numpy(value: Any) -> Any:
    """A result as the judge receives it: torch tensors as numpy arrays (bfloat16 through ml_dtypes)."""
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bfloat16:
            return value.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return value.numpy()
    if isinstance(value, dict):
        return {key: _numpy(inner) for key, inner in value.items()}
    if isinstance(value, (list, tuple)):
        return [_numpy(inner) for inner in value]
    return value


def _run(subject: Callable[..., Any], data: dict[str, Any]) -> Any:
    return _numpy(subject(**torch_inputs(data).kwargs))


def _value_cases(gate_id: str) -> list[Any]:
    return [case for case in GATES[gate_id].cases if case.raises is None]


def _disagreement(gate: Gate, subject: Callable[..., Any], data: dict[str, Any]) -> list[str] | None:
    """None where ``subject`` agrees with the gate's oracle on ``data`` under the gate's comparison, else the report's
    differing and array lines."""
    comparison = compare_under(gate.policy, _run(subject, data), _resolve(gate.oracle)(**data))
    return None if comparison.passed else [f"{label}: {text}" for label, text in how_far_off(comparison)]


def _more_parts(path: str, count: str, first: str, expected: str) -> re.Pattern[str]:
    """The line of a rank holding ``count`` parts (``first`` the first) where one part (``expected``) is expected."""
    return re.compile(re.escape(f"{path}: {count} where {expected.count('source')} ") + r"(is|are) expected: "
                      + re.escape(f"[{first}, ") + ".* where " + re.escape(f"[{expected}] is expected"))


# Each defect: its reduced-signature function, the reduced gates it passes, the per-rank gate, the case whose report
# is read and lines that report must hold: the rank, the tensor, the range held and the range expected.
DEFECTS = {
    "row-columns-reversed": (bad.row_columns_reversed, ("tp-row-linear", "tp-row-linear-bfloat16"),
                             bad.ranks_row_columns_reversed, "tp-ranks-row", "in-48-tp2-float32",
                             ["result[0].held.weight.parts[0].cols: [24, 48] where [0, 24] is expected",
                              "result[1].held.weight.parts[0].cols: [0, 24] where [24, 48] is expected"]),
    "row-columns-strided": (bad.row_columns_strided, ("tp-row-linear", "tp-row-linear-bfloat16"),
                            bad.ranks_row_columns_strided, "tp-ranks-row", "in-48-tp2-float32",
                            [_more_parts("result[1].held.weight.parts", "24 items",
                                         "{source: weight, rows: [0, 40], cols: [1, 2]}",
                                         "{source: weight, rows: [0, 40], cols: [24, 48]}")]),
    "row-bias-on-last-rank": (bad.row_bias_on_last_rank, ("tp-row-linear", "tp-row-linear-bfloat16"),
                              bad.ranks_row_bias_on_last_rank, "tp-ranks-row", "in-48-tp4-float32",
                              [re.compile(r"result\[0\]\.bias: null where \{'parts': \[\{'source': 'bias', 'rows': "
                                          r"\[0, 40\]\}\].* is expected"),
                               re.compile(r"result\[3\]\.bias: \{'parts': \[\{'source': 'bias', 'rows': \[0, 40\]\}\].* "
                                          r"where null is expected")]),
    "mlp-ffn-strided": (bad.mlp_ffn_strided, ("tp-mlp", "tp-mlp-bfloat16"), bad.ranks_mlp_ffn_strided, "tp-ranks-mlp",
                        "ffn-48-tp3-float32",
                        [_more_parts("result[0].held.gate_up.parts", "32 items",
                                     "{source: gate_weight, rows: [0, 1], cols: [0, 32]}",
                                     "{source: gate_weight, rows: [0, 16], cols: [0, 32]}, "
                                     "{source: up_weight, rows: [0, 16], cols: [0, 32]}"),
                         _more_parts("result[2].held.down.parts", "16 items",
                                     "{source: down_weight, rows: [0, 32], cols: [2, 3]}",
                                     "{source: down_weight, rows: [0, 32], cols: [32, 48]}")]),
    "mlp-ffn-rotated": (bad.mlp_ffn_rotated, ("tp-mlp", "tp-mlp-bfloat16"), bad.ranks_mlp_ffn_rotated, "tp-ranks-mlp",
                        "ffn-48-tp3-float32", ["result[0].held.gate_up.parts[0].rows: [16, 32] where [0, 16] is expected",
                                               "result[0].held.gate_up.parts[1].rows: [16, 32] where [0, 16] is expected",
                                               "result[0].held.down.parts[0].cols: [16, 32] where [0, 16] is expected",
                                               "result[2].held.gate_up.parts[0].rows: [0, 16] where [32, 48] is expected"]),
    "embedding-vocab-rotated": (bad.embedding_vocab_rotated, ("tp-vocab-embedding",), bad.ranks_vocab_rotated,
                                "tp-ranks-embedding", "issue-tp3-float32",
                                ["result[0].held.weight.parts[0].rows: [64, 128] where [0, 64] is expected",
                                 "result[1].held.weight.parts[0].rows: [128, 130] where [64, 128] is expected",
                                 "result[1].held.weight.padding_rows: 62 where 0 is expected",
                                 "result[2].held.weight.parts[0].rows: [0, 64] where [128, 130] is expected"]),
    "embedding-vocab-strided": (bad.embedding_vocab_strided, ("tp-vocab-embedding",), bad.ranks_vocab_strided,
                                "tp-ranks-embedding", "issue-tp3-float32",
                                [_more_parts("result[1].held.weight.parts", "43 items",
                                             "{source: weight, rows: [1, 2], cols: [0, 16]}",
                                             "{source: weight, rows: [64, 128], cols: [0, 16]}"),
                                 "result[2].held.weight.padding_rows: 21 where 62 is expected"]),
    "lm-head-vocab-rotated": (bad.lm_head_vocab_rotated, ("tp-lm-head",), bad.ranks_vocab_rotated, "tp-ranks-lm-head",
                              "issue-tp2-float32", ["result[0].held.weight.parts[0].rows: [96, 130] where [0, 96] is expected",
                                                    "result[1].held.weight.parts[0].rows: [0, 96] where [96, 130] is expected",
                                                    "result[1].held.weight.padding_rows: 0 where 62 is expected"]),
    "lm-head-vocab-strided": (bad.lm_head_vocab_strided, ("tp-lm-head",), bad.ranks_vocab_strided, "tp-ranks-lm-head",
                              "issue-tp2-float32", [_more_parts("result[0].held.weight.parts", "65 items",
                                                                "{source: weight, rows: [0, 1], cols: [0, 32]}",
                                                                "{source: weight, rows: [0, 96], cols: [0, 32]}"),
                                                    "result[1].held.weight.padding_rows: 31 where 62 is expected"]),
    "column-gathered-rotated": (bad.column_gathered_rotated, ("tp-column-linear",), bad.ranks_column_gathered_rotated,
                                "tp-ranks-column", "gathered-tp2-float32",
                                ["result[0].held.weight.parts[0].rows: [24, 48] where [0, 24] is expected",
                                 "result[1].bias.parts[0].rows: [0, 24] where [24, 48] is expected"]),
    "qkv-fused-q-v-k": (bad.qkv_fused_q_v_k, ("tp-qkv-linear",), bad.ranks_qkv_fused_q_v_k, "tp-ranks-qkv",
                        "issue-tp2-float32", ["result[1].held.qkv.parts[1].source: v_weight where k_weight is expected",
                                              "result[1].held.qkv.parts[2].source: k_weight where v_weight is expected",
                                              "result[1].bias.parts[1].source: v_bias where k_bias is expected"]),
}


def test_every_per_rank_known_bad_is_a_tested_defect() -> None:
    """Each known-bad the per-rank gates list is one of DEFECTS, and each defect is listed under its gate."""
    listed = {(gate.id, kb.target.attribute) for gate in GATES.values() if gate.id.startswith("tp-ranks-")
              for kb in gate.known_bad}
    tested = {(ranks_gate, _name_of(ranks)) for _, _, ranks, ranks_gate, _, _ in DEFECTS.values()}
    assert listed == tested


def _name_of(function: Callable[..., Any]) -> str:
    """The name known_bad/w2_ranks.py gives a tp-layer-ranks known-bad (each is made by one factory)."""
    return next(name for name, value in vars(bad).items() if value is function and name.startswith("ranks_"))


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_the_reduced_gates_pass_the_known_bad(defect: str) -> None:
    """The reduced-signature twin agrees with the reduced oracle on every named case and drawn examples of its gates."""
    reduced, gate_ids, *_ = DEFECTS[defect]
    for gate_id in gate_ids:
        gate = GATES[gate_id]
        assert not any(kb.target.attribute == reduced.__name__ for kb in gate.known_bad)
        for case in _value_cases(gate_id):
            assert _disagreement(gate, reduced, case.input) is None, (gate_id, case.name)
        strategy = _resolve(gate.properties.strategy)()

        @settings(max_examples=DRAWN, derandomize=True, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(strategy)
        def agrees(data: dict[str, Any]) -> None:
            assert _disagreement(gate, reduced, data) is None, (gate_id, data)

        agrees()


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_the_per_rank_gate_rejects_the_known_bad_by_rank_tensor_and_range(defect: str) -> None:
    _, _, ranks, gate_id, case_name, wanted = DEFECTS[defect]
    gate = GATES[gate_id]
    case = next(case for case in gate.cases if case.name == case_name)
    report = _disagreement(gate, ranks, case.input)
    assert report is not None, f"{gate_id} case {case_name} passes the known-bad {defect}"
    differs = [line.removeprefix("differs: ") for line in report if line.startswith("differs: ")]
    for line in wanted:
        if isinstance(line, str):
            assert line in differs, (line, report)
        else:
            assert any(line.fullmatch(shown) for shown in differs), (line.pattern, report)


@pytest.mark.parametrize("gate_id", sorted(gate for gate in GATES if gate.startswith("tp-ranks-")))
def test_the_port_without_the_defects_agrees_with_the_oracle(gate_id: str) -> None:
    """The known-bads' port with the correct layouts passes every named case: each known-bad fails by its defect only."""
    for case in _value_cases(gate_id):
        assert _disagreement(GATES[gate_id], bad.ranks_correct, case.input) is None, case.name


# The oracle's own checks -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", [(gate.id, case) for gate in GATES.values() if gate.id.startswith("tp-ranks-")
                                  for case in gate.cases if case.raises is not None], ids=lambda gc: f"{gc[0]}-{gc[1].name}")
def test_the_oracle_refuses_every_refusal_case_as_the_case_says(case: Any) -> None:
    _, case = case
    with pytest.raises(Exception) as raised:
        layer_ranks(**case.input)
    assert type(raised.value).__name__ == case.raises.type_name
    assert re.search(case.raises.match, str(raised.value)), str(raised.value)


def _normal(shape: tuple[int, ...], seed: int, scale: float = 1.0, dtype: Any = np.float32) -> np.ndarray:
    return (scale * np.random.Generator(np.random.PCG64(seed)).standard_normal(shape)).astype(dtype)


GEOMETRIES = [  # hidden, heads, kv heads, head_dim, ffn, vocab, tp
    (16, 8, 2, 2, 24, 130, tp) for tp in (1, 2, 4, 8) if 24 % tp == 0] + [
    (16, 6, 3, 2, 48, 150, 3), (16, 6, 1, 2, 48, 129, 3), (16, 16, 8, 2, 32, 64, 2), (8, 4, 4, 2, 8, 200, 4)]


@pytest.mark.parametrize("hidden, heads, kv_heads, head_dim, ffn, vocab, tp", GEOMETRIES)
def test_the_oracles_ranges_are_the_shard_plan_oracles(hidden: int, heads: int, kv_heads: int, head_dim: int, ffn: int,
                                                       vocab: int, tp: int) -> None:
    """Two oracles written apart agree: every rank's held ranges, padding rows and bias ranges are the shard plan's
    (oracles/shard_plan.py), the sources renamed from checkpoint names to input names."""
    plan = vllm_shard_plan({"hidden": hidden, "num_heads": heads, "num_kv_heads": kv_heads, "head_dim": head_dim,
                            "ffn": ffn, "vocab": vocab}, tp)["ranks"]
    x = _normal((2, hidden), 1)
    q, kv = heads * head_dim, kv_heads * head_dim
    qkv = layer_ranks("qkv", {"x": x, "q_weight": _normal((q, hidden), 2), "k_weight": _normal((kv, hidden), 3),
                              "v_weight": _normal((kv, hidden), 4), "q_bias": _normal((q,), 5),
                              "k_bias": _normal((kv,), 6), "v_bias": _normal((kv,), 7), "num_heads": heads,
                              "num_kv_heads": kv_heads, "head_dim": head_dim}, tp)
    o_proj = layer_ranks("row", {"x": _normal((2, q), 8), "weight": _normal((hidden, q), 9),
                                 "bias": _normal((hidden,), 10)}, tp)
    mlp = layer_ranks("mlp", {"x": x, "gate_weight": _normal((ffn, hidden), 11), "up_weight": _normal((ffn, hidden), 12),
                              "down_weight": _normal((hidden, ffn), 13)}, tp)
    embedding = layer_ranks("embedding", {"ids": np.arange(vocab), "weight": _normal((vocab, hidden), 14)}, tp)
    renamed = {"q_proj": "q_weight", "k_proj": "k_weight", "v_proj": "v_weight", "o_proj": "weight",
               "gate_proj": "gate_weight", "up_proj": "up_weight", "down_proj": "down_weight", "embed_tokens": "weight"}

    def parts(weight: dict[str, Any]) -> list[dict[str, Any]]:
        return [{**part, "source": renamed[part["source"]]} for part in weight["parts"]]

    for rank, planned in enumerate(plan):
        weights = planned["weights"]
        assert qkv[rank]["held"]["qkv"]["parts"] == parts(weights["qkv_proj"])
        assert [part["rows"] for part in qkv[rank]["bias"]["parts"]] == [p["rows"] for p in weights["qkv_proj"]["parts"]]
        assert o_proj[rank]["held"]["weight"]["parts"] == parts(weights["o_proj"])
        assert (o_proj[rank]["bias"] or {}).get("parts", [{}])[0].get("rows") == weights["o_proj"]["bias"]
        assert mlp[rank]["held"]["gate_up"]["parts"] == parts(weights["gate_up_proj"])
        assert mlp[rank]["held"]["down"]["parts"] == parts(weights["down_proj"])
        held = embedding[rank]["held"]["weight"]
        assert held["parts"] == parts(weights["embed_tokens"])
        assert held["padding_rows"] == weights["embed_tokens"]["padding_rows"]
        assert embedding[rank]["mask"].sum() == np.diff(planned["vocab_loaded"])[0]
        assert [rank["held"]["qkv"]["tensor"].shape[0] for rank in qkv] == [weights["qkv_proj"]["shape"][0]] * tp


@pytest.mark.parametrize("tp", [1, 2, 3, 4, 8])
def test_the_partials_reduce_to_the_unsharded_layer_oracles(tp: int) -> None:
    """Summed (row, mlp's down, embedding) or concatenated in rank order (column, lm_head), the ranks' partials are
    tp_layers' unsharded outputs; each rank's mask picks its loaded ids and exactly one rank takes each id."""
    x, weight, bias = _normal((4, 48), 1), _normal((24, 48), 2, 0.14), _normal((24,), 3)
    row = layer_ranks("row", {"x": x, "weight": weight, "bias": bias}, tp)
    total = sum(rank["partials"]["out"].astype(np.float64) for rank in row)
    np.testing.assert_allclose(total, tp_layers.row_linear(x, weight, bias, tp)[0], rtol=1e-5, atol=1e-5)
    column = layer_ranks("column", {"x": x, "weight": _normal((48, 48), 4, 0.14), "bias": None, "gather_output": True}, tp)
    gathered = np.concatenate([rank["partials"]["out"] for rank in column], axis=1)
    assert np.array_equal(gathered, tp_layers.column_linear(x, _normal((48, 48), 4, 0.14), None, tp, True)[0])
    mlp = layer_ranks("mlp", {"x": x, "gate_weight": _normal((48, 48), 5, 0.14), "up_weight": _normal((48, 48), 6, 0.14),
                              "down_weight": _normal((48, 48), 7, 0.14)}, tp)
    summed = sum(rank["partials"]["down"].astype(np.float64) for rank in mlp)
    expected = tp_layers.mlp(x, _normal((48, 48), 5, 0.14), _normal((48, 48), 6, 0.14), _normal((48, 48), 7, 0.14), tp)
    np.testing.assert_allclose(summed, expected[0], rtol=1e-5, atol=1e-5)
    ids, table = np.array([0, 63, 64, 127, 128, 129, 5]), _normal((130, 8), 8)
    embedding = layer_ranks("embedding", {"ids": ids, "weight": table}, tp)
    assert np.array_equal(sum(rank["mask"].astype(int) for rank in embedding), np.ones(ids.size, int))
    assert np.array_equal(sum(rank["partials"]["rows"] for rank in embedding), table[ids])
    head = _normal((130, 48), 9, 0.14)
    logits = np.concatenate([rank["partials"]["logits"] for rank in layer_ranks("lm_head", {"hidden_states": x,
                                                                                          "weight": head}, tp)], axis=1)
    assert np.array_equal(logits[:, :130], tp_layers.lm_head(x, head, tp)[0]) and not logits[:, 130:].any()


def test_the_oracle_rounds_each_partial_once_and_copies_what_a_rank_holds() -> None:
    x = _normal((3, 8), 1, dtype=ml_dtypes.bfloat16)
    weight, bias = _normal((6, 8), 2, 0.35, ml_dtypes.bfloat16), _normal((6,), 3, dtype=ml_dtypes.bfloat16)
    for rank, state in enumerate(layer_ranks("row", {"x": x, "weight": weight, "bias": bias}, 2)):
        columns = slice(4 * rank, 4 * rank + 4)
        exact = x[:, columns].astype(np.float64) @ weight[:, columns].astype(np.float64).T
        exact = exact + bias.astype(np.float64) if rank == 0 else exact
        assert state["partials"]["out"].dtype == ml_dtypes.bfloat16
        assert np.array_equal(state["partials"]["out"], exact.astype(ml_dtypes.bfloat16))
        assert np.array_equal(state["held"]["weight"]["tensor"], weight[:, columns])
        assert (state["bias"] is None) == (rank == 1) and state["mask"] is None


def test_a_rank_holding_padding_only_sits_at_vocab_with_zero_rows() -> None:
    ids, table = np.array([0, 129]), _normal((130, 4), 1)
    ranks = layer_ranks("embedding", {"ids": ids, "weight": table}, 8)
    last = ranks[7]
    assert last["held"]["weight"]["parts"] == [{"source": "weight", "rows": [130, 130], "cols": [0, 4]}]
    assert last["held"]["weight"]["padding_rows"] == 24 and not last["held"]["weight"]["tensor"].any()
    assert not last["mask"].any() and not last["partials"]["rows"].any()
    assert ranks[5]["held"]["weight"]["parts"][0]["rows"] == [120, 130] and ranks[5]["held"]["weight"]["padding_rows"] == 14
