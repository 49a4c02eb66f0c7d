"""Unit tests of impl/distributed/parallel_layout.py: validation, StridedRanks, table invariants."""
from __future__ import annotations

import pytest
from hypothesis import given, settings

from gates.rows.backend_distributed_tp.strategies import layouts
from impl.distributed.parallel_layout import (
    GROUP_KINDS, ParallelDims, StridedRanks, group_ranks, rank_group,
)

pytestmark = pytest.mark.cpu

WORLD16 = ParallelDims(external_dp=2, dp=2, pp=2, pcp=1, tp=2)


def test_defaults_and_world_size() -> None:
    assert ParallelDims() == ParallelDims(tp=1, pcp=1, pp=1, dp=1, external_dp=1, dcp=1)
    assert ParallelDims().world_size == 1
    assert ParallelDims(tp=2, pcp=3, pp=5, dp=7, external_dp=11).world_size == 2310
    assert ParallelDims(tp=8, dcp=4).world_size == 8  # DCP adds no ranks


@pytest.mark.parametrize(("fields", "error", "message"), [
    ({"tp": 0}, ValueError, "ParallelDims.tp must be an int >= 1, got 0"),
    ({"pcp": -1}, ValueError, "ParallelDims.pcp must be an int >= 1, got -1"),
    ({"pp": True}, TypeError, "ParallelDims.pp must be an int >= 1, got True (bool)"),
    ({"dp": 2.0}, TypeError, "ParallelDims.dp must be an int >= 1, got 2.0 (float)"),
    ({"external_dp": None}, TypeError, "ParallelDims.external_dp must be an int >= 1, got None"),
    ({"dcp": 0}, ValueError, "ParallelDims.dcp must be an int >= 1, got 0"),
    ({"tp": 6, "dcp": 4}, ValueError, "tp_size=6 must be divisible by dcp_size=4; accepted dcp for tp=6: [1, 2, 3, 6]"),
    ({"tp": 2, "pcp": 3, "dcp": 2}, ValueError,
     "ParallelDims.dcp: When PCP is enabled, DCP must be disabled, span the PCP axis, or span the full TP x PCP axis. "
     "Got TP=2, PCP=3, DCP=2; valid DCP sizes are [1, 3, 6]."),
    ({"tp": 1, "pcp": 2, "dcp": 4}, ValueError, "Got TP=1, PCP=2, DCP=4; valid DCP sizes are [1, 2]."),
])
def test_bad_sizes_are_refused_naming_field_value_and_range(fields: dict, error: type, message: str) -> None:
    with pytest.raises(error) as raised:
        ParallelDims(**fields)
    assert message in str(raised.value)


@pytest.mark.parametrize("sizes", [
    {"tp": 1, "pcp": 2, "dcp": 2}, {"tp": 2, "pcp": 2, "dcp": 2}, {"tp": 2, "pcp": 2, "dcp": 4}, {"tp": 3, "pcp": 2, "dcp": 1},
    {"tp": 4, "dcp": 2},
])
def test_dcp_sizes_of_vllm_parallel_config_are_accepted(sizes: dict) -> None:
    assert ParallelDims(**sizes).world_size == sizes["tp"] * sizes.get("pcp", 1)


def test_dcp_spans_pcp_first_then_tp() -> None:
    """vLLM transposes the last two axes before reshape(-1, dcp) when dcp > 1 (vllm/distributed/parallel_state.py)."""
    assert group_ranks(ParallelDims(tp=2, pcp=2, dcp=2), "dcp") == [[0, 2], [1, 3]]
    assert group_ranks(ParallelDims(tp=2, pcp=2, dcp=2), "dcp") == group_ranks(ParallelDims(tp=2, pcp=2, dcp=2), "pcp")
    assert group_ranks(ParallelDims(dp=2, tp=2, pcp=2, dcp=4), "dcp") == [[0, 2, 1, 3], [4, 6, 5, 7]]
    assert group_ranks(ParallelDims(tp=1, pcp=2, dcp=2), "dcp") == [[0, 1]]
    assert group_ranks(ParallelDims(tp=2, pcp=2), "dcp") == [[0], [1], [2], [3]]
    full = rank_group(ParallelDims(dp=2, tp=3, pcp=2, dcp=6), 10, "dcp")
    assert list(full.ranks) == [6, 9, 7, 10, 8, 11] and full.local_rank == 3
    assert full.ranks == StridedRanks(6, 3, 1, 2, 3) and full.ranks.index(10) == 3 and 12 not in full.ranks


def test_dcp_message_is_spaced() -> None:
    with pytest.raises(ValueError) as raised:
        ParallelDims(tp=4, dcp=3)
    assert "divisible by dcp_size=3" in str(raised.value) and "bydcp" not in str(raised.value)


def test_dims_are_frozen() -> None:
    with pytest.raises(AttributeError):
        ParallelDims().tp = 2  # type: ignore[misc]


@pytest.mark.parametrize(("rank", "error", "message"), [
    (16, ValueError, "rank=16 is outside the world of 16 ranks; accepted range [0, 15]"),
    (-1, ValueError, "rank=-1 is outside the world of 16 ranks"),
    (True, TypeError, "rank must be an int in [0, 15], got True (bool)"),
    ("3", TypeError, "rank must be an int in [0, 15], got '3' (str)"),
])
def test_rank_outside_the_world_is_an_error(rank: object, error: type, message: str) -> None:
    with pytest.raises(error) as raised:
        rank_group(WORLD16, rank, "tp")
    assert message in str(raised.value)


def test_unknown_kind_and_wrong_dims_type() -> None:
    with pytest.raises(ValueError, match="kind='sp' is not a group kind; accepted: tp, dcp, pcp, pp, dp, ep"):
        group_ranks(WORLD16, "sp")
    with pytest.raises(ValueError, match="kind='TP'"):
        rank_group(WORLD16, 0, "TP")
    with pytest.raises(TypeError, match="dims must be a ParallelDims"):
        group_ranks({"tp": 2}, "tp")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dims must be a ParallelDims"):
        rank_group({"tp": 2}, 0, "tp")  # type: ignore[arg-type]


def test_strided_ranks_is_a_sequence() -> None:
    ep = StridedRanks(start=2, blocks=3, block_stride=8, block_len=2, step=1)
    assert list(ep) == [2, 3, 10, 11, 18, 19]
    assert len(ep) == 6 and ep[0] == 2 and ep[3] == 11 and ep[-1] == 19 and ep[1:5:2] == [3, 11]
    assert ep.index(18) == 4 and 10 in ep and 4 not in ep and 20 not in ep and True not in ep
    assert ep == [2, 3, 10, 11, 18, 19] and ep == (2, 3, 10, 11, 18, 19) and [2, 3, 10, 11, 18, 19] == ep
    assert ep != [2, 3, 10, 11, 18] and ep != {2, 3, 10, 11, 18, 19}
    assert StridedRanks(4, 1, 4, 4, 1) == range(4, 8) and StridedRanks(1, 4, 3, 1, 1) == range(1, 12, 3)
    assert repr(ep) == "StridedRanks([2, 3, 10, 11, 18, 19])"
    with pytest.raises(IndexError, match=r"index 6 is outside \[-6, 5\]"):
        ep[6]
    with pytest.raises(ValueError, match="4 is not a member"):
        ep.index(4)
    with pytest.raises(AttributeError, match="immutable"):
        ep.start = 0  # type: ignore[misc]


def test_strided_ranks_with_a_step_runs_inside_the_blocks() -> None:
    block = StridedRanks(start=8, blocks=2, block_stride=1, block_len=3, step=2)  # tp=2, pcp=3, dcp=6, from rank 8
    assert list(block) == [8, 10, 12, 9, 11, 13] and len(block) == 6 and block[4] == 11 and block[-1] == 13
    assert [block.index(r) for r in range(8, 14)] == [0, 3, 1, 4, 2, 5] and 14 not in block and 7 not in block
    assert StridedRanks(0, 1, 1, 3, 4) == [0, 4, 8] and StridedRanks(0, 2, 8, 2, 3) == [0, 3, 8, 11]


def test_worked_example_groups_of_rank_13() -> None:
    """EDP2 x DP2 x PP2 x TP2: rank 13 is (edp 1, dp 1, pp 0, tp 1)."""
    seen = {kind: (list(rank_group(WORLD16, 13, kind).ranks), rank_group(WORLD16, 13, kind).local_rank) for kind in GROUP_KINDS}
    assert seen == {"tp": ([12, 13], 1), "dcp": ([13], 0), "pcp": ([13], 0), "pp": ([13, 15], 0),
                    "dp": ([9, 13], 1), "ep": ([8, 9, 12, 13], 3)}


@settings(max_examples=120, deadline=None)
@given(layouts())
def test_tables_partition_the_world_and_agree_with_rank_group(data: dict) -> None:
    dims, kind = ParallelDims(**data["dims"]), data["kind"]
    table = group_ranks(dims, kind)
    assert sorted(rank for group in table for rank in group) == list(range(dims.world_size))
    sizes = {"tp": dims.tp, "dcp": dims.dcp, "pcp": dims.pcp, "pp": dims.pp, "dp": dims.dp, "ep": dims.dp * dims.pcp * dims.tp}
    assert {len(group) for group in table} == {sizes[kind]}
    full_block_dcp = kind == "dcp" and dims.pcp > 1 and dims.dcp == dims.tp * dims.pcp > dims.pcp
    for group in table:
        if full_block_dcp:  # PCP first, then TP: one (pcp, tp) block, not in rank order
            assert sorted(group) == list(range(group[0], group[0] + dims.dcp))
            assert group == [group[0] + c * dims.tp + t for t in range(dims.tp) for c in range(dims.pcp)]
        else:
            assert group == sorted(group)  # members ascend, so torch's group rank is the index
        for index, rank in enumerate(group):
            found = rank_group(dims, rank, kind)
            assert found.ranks == group and found.local_rank == index


@settings(max_examples=80, deadline=None)
@given(layouts())
def test_dcp_inside_tp_and_ep_inside_one_stage(data: dict) -> None:
    dims = ParallelDims(**data["dims"])
    for rank in range(0, dims.world_size, max(1, dims.world_size // 64)):
        dcp = set(rank_group(dims, rank, "dcp").ranks)
        if dims.pcp == 1:
            assert dcp <= set(rank_group(dims, rank, "tp").ranks)
        block = rank - rank % (dims.tp * dims.pcp)  # otherwise inside the rank's (pcp, tp) block
        assert dcp <= set(range(block, block + dims.tp * dims.pcp))
        stage_size, dp_size = dims.tp * dims.pcp, dims.tp * dims.pcp * dims.pp * dims.dp  # TP-1.3's strides
        stages = {(r // dp_size, r // stage_size % dims.pp) for r in rank_group(dims, rank, "ep").ranks}
        assert len(stages) == 1
