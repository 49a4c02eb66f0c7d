"""Every known-bad of the BACKEND-DISTRIBUTED-TP gates is told apart from the impl on a named input."""
from __future__ import annotations

import pytest

from gates.rows.backend_distributed_tp.subjects_gloo import predict_gloo_observations
from gates.rows.backend_distributed_tp.scenarios import handle_scenario
from gates.rows.backend_distributed_tp.subjects import layout_query, parallel_dims_accepts, rank_groups
from gates.rows.backend_distributed_tp import rank_group_lookups as lookups, tp_collective_call as collectives
from gates.rows.backend_distributed_tp.known_bad import gloo as tp_gloo, handle as tp_handle, layout as tp_layout
from impl.distributed.parallel_layout import ParallelDims, group_ranks

pytestmark = pytest.mark.cpu

WORLD16 = ParallelDims(external_dp=2, dp=2, pp=2, pcp=1, tp=2)
DP2_TP4_DCP2 = ParallelDims(dp=2, tp=4, dcp=2)


@pytest.mark.parametrize(("bad", "dims", "kind"), [
    (tp_layout.tp_outermost, WORLD16, "tp"),
    (tp_layout.groups_sorted, WORLD16, "dp"),
    (tp_layout.dcp_chunks_cross_tp, DP2_TP4_DCP2, "dcp"),
    (tp_layout.ep_spans_pipeline_stages, WORLD16, "ep"),
    (tp_layout.dcp_ignores_pcp, ParallelDims(tp=2, pcp=2, dcp=2), "dcp"),
])
def test_bad_tables_differ(bad, dims: ParallelDims, kind: str) -> None:
    assert bad(dims, kind) != group_ranks(dims, kind)


def test_bad_tables_are_the_named_bugs() -> None:
    assert tp_layout.tp_outermost(WORLD16, "tp")[0] == [0, 8]
    assert tp_layout.dcp_chunks_cross_tp(DP2_TP4_DCP2, "dcp")[0] == [0, 4]  # spans TP groups [0-3] and [4-7]
    assert tp_layout.ep_spans_pipeline_stages(WORLD16, "ep")[0] == [0, 1, 2, 3]  # stages 0 and 1
    assert tp_layout.groups_sorted(WORLD16, "dp")[:3] == [[0, 4], [1, 5], [2, 6]]


@pytest.mark.parametrize(("bad", "kind"), [
    (tp_layout.local_rank_off_by_one, "tp"),
    (tp_layout.rank_groups_tp_outermost, "pp"),
    (tp_layout.rank_groups_ep_spans_stages, "ep"),
])
def test_bad_rank_groups_differ(bad, kind: str) -> None:
    assert bad(WORLD16, kind) != rank_groups(WORLD16, kind)


def test_dcp_ignoring_pcp_is_the_old_bug() -> None:
    dims = ParallelDims(tp=2, pcp=2, dcp=2)
    assert tp_layout.dcp_ignores_pcp(dims, "dcp") == [[0, 1], [2, 3]]
    assert tp_layout.rank_groups_dcp_ignores_pcp(dims, "dcp") != rank_groups(dims, "dcp")


@pytest.mark.parametrize(("bad", "dims"), [
    (tp_layout.dcp_rule_ignores_pcp, {"tp": 1, "pcp": 2, "dcp": 2}),  # refuses what vLLM takes
    (tp_layout.dcp_rule_ignores_pcp, {"tp": 2, "pcp": 3, "dcp": 2}),  # takes what vLLM refuses
    (tp_layout.dcp_divides_tp_times_pcp, {"tp": 4, "pcp": 2, "dcp": 4}),
    (tp_layout.dcp_unchecked, {"tp": 4, "dcp": 3}),
])
def test_bad_size_rules_differ(bad, dims: dict) -> None:
    def outcome(fn):
        try:
            return fn(dims)
        except ValueError:
            return "refused"
    assert outcome(bad) != outcome(parallel_dims_accepts)
    with pytest.raises(ValueError):
        tp_layout.layout_query_dcp_rule_ignores_pcp({"tp": 1, "pcp": 2, "dcp": 2}, 0, "tp")


@pytest.mark.parametrize(("bad", "dims", "rank"), [
    (tp_layout.bools_accepted, {"tp": True}, 0),
    (tp_layout.dcp_divisibility_unchecked, {"tp": 4, "dcp": 3}, 0),
    (tp_layout.rank_wraps_around, {"tp": 2}, 2),
])
def test_bad_validation_answers_where_the_impl_refuses(bad, dims: dict, rank: int) -> None:
    with pytest.raises((TypeError, ValueError)):
        layout_query(dims, rank, "tp")
    assert bad(dims, rank, "tp")["world_size"] >= 1


def test_vllm_message_typo_is_told_apart() -> None:
    with pytest.raises(ValueError, match="divisible bydcp_size=3"):
        tp_layout.vllm_message_missing_space({"tp": 4, "dcp": 3}, 0, "tp")
    with pytest.raises(ValueError, match="divisible by dcp_size=3"):
        layout_query({"tp": 4, "dcp": 3}, 0, "tp")


@pytest.mark.parametrize(("bad", "scenario", "tp", "rank"), [
    (tp_handle.process_global_handle, "sibling-thread", 4, 2),
    (tp_handle.process_global_handle, "rank-threads", 4, 0),
    (tp_handle.scope_clears_instead_of_restoring, "scope-restores", 2, 0),
    (tp_handle.singleton_all_reduce_copies, "singleton", 1, 0),
    (tp_handle.unset_world_size_zero, "unset", 1, 0),
])
def test_bad_handles_differ(bad, scenario: str, tp: int, rank: int) -> None:
    assert bad(scenario, tp, rank) != handle_scenario(scenario, tp, rank)


@pytest.mark.parametrize("bad", [tp_gloo.local_rank_off_by_one, tp_gloo.members_descending])
def test_bad_gloo_predictions_differ(bad) -> None:
    layouts = [ParallelDims(dp=2, pp=2, tp=2), DP2_TP4_DCP2]
    assert bad(layouts) != predict_gloo_observations(layouts)


@pytest.mark.parametrize("bad", [lookups.negative_index_from_the_front, lookups.position_counts_from_one])
def test_bad_sequence_views_differ(bad) -> None:
    """The rank-group-sequence known-bads differ from the impl's view on a group of two members."""
    assert bad(WORLD16, 13, "dp") != lookups.rank_group_lookups(WORLD16, 13, "dp")


@pytest.mark.parametrize(("bad", "collective", "arg"), [
    (collectives.groups_above_one_return_input, "all_reduce", None),
    (collectives.all_gather_drops_dim, "all_gather", 0),
])
def test_bad_handles_forward_otherwise(bad, collective: str, arg) -> None:
    """The collectives-forwarded known-bads differ from the impl's handle on a two-rank group."""
    assert bad(2, collective, [2, 3], 1, arg) != collectives.tp_collective_call(2, collective, [2, 3], 1, arg)
