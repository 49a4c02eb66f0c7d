"""The TP-W2 shard plan (spec/tensor-parallel.md TP-4.1 to TP-4.8): impl and index-array oracle agree over a grid of
geometries, the issue's geometry reads as vLLM cuts it, and each known-bad plan differs on a named input."""
from __future__ import annotations

import itertools

import pytest

from gates.rows.backend_distributed_tp import tp_shard_plan as bad_plans
from impl.distributed.shard_plan import shard_plan_of
from oracles.shard_plan import vllm_shard_plan

pytestmark = pytest.mark.cpu

ISSUE = {"hidden": 64, "num_heads": 8, "num_kv_heads": 2, "head_dim": 8, "ffn": 64, "vocab": 130}


def _outcome(plan, geometry, tp):
    try:
        return plan(geometry, tp)
    except ValueError:
        return "refused"


def test_impl_and_oracle_agree_over_a_grid_of_geometries() -> None:
    compared = refused = 0
    for heads, kv, tp, vocab, ffn in itertools.product([1, 2, 4, 6, 8, 12], [1, 2, 3, 4, 8], [1, 2, 3, 4, 6, 8],
                                                        [1, 63, 64, 130, 1000], [24, 60]):
        geometry = {"hidden": 20, "num_heads": heads, "num_kv_heads": kv, "head_dim": 3, "ffn": ffn, "vocab": vocab}
        ours = _outcome(shard_plan_of, geometry, tp)
        assert ours == _outcome(vllm_shard_plan, geometry, tp), (geometry, tp)
        compared += ours != "refused"
        refused += ours == "refused"
    assert compared > 300 and refused > 300


def test_issue_geometry_at_tp8_replicates_kv_and_pads_the_last_ranks() -> None:
    plan = shard_plan_of(ISSUE, 8)
    assert (plan["padded_vocab"], plan["kv_replicas"], plan["kv_heads_per_rank"]) == (192, 4, 1)
    assert [rank["kv_shard"] for rank in plan["ranks"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [rank["vocab_loaded"] for rank in plan["ranks"]][5:] == [[120, 130], [130, 130], [130, 130]]
    assert [rank["weights"]["embed_tokens"]["padding_rows"] for rank in plan["ranks"]] == [0] * 5 + [14, 24, 24]
    assert [rank["weights"]["o_proj"]["bias"] for rank in plan["ranks"]] == [[0, 64]] + [None] * 7


@pytest.mark.parametrize(("bad", "geometry", "tp"), [
    (bad_plans.kv_shard_by_rank, ISSUE, 4),
    (bad_plans.kv_heads_floor_divided, ISSUE, 4),
    (bad_plans.bias_on_every_rank, ISSUE, 2),
    (bad_plans.row_layers_split_rows, ISSUE, 2),
    (bad_plans.vocab_padded_to_32, ISSUE, 2),
    (bad_plans.vocab_not_padded, ISSUE, 2),
    (bad_plans.vocab_loaded_end_off_by_one, ISSUE, 2),
    (bad_plans.tied_head_reads_lm_head, dict(ISSUE, tie_word_embeddings=True), 2),
    (bad_plans.gate_up_split_as_one, ISSUE, 2),
])
def test_each_known_bad_plan_differs(bad, geometry: dict, tp: int) -> None:
    assert _outcome(bad, geometry, tp) != shard_plan_of(geometry, tp)
