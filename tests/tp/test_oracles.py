"""Tests of the TP oracles' own behaviour: oracles/layout.py input checks and the collective oracle's bounds."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gates.rows.backend_distributed_tp.build_gloo import oracle_layouts
from gates.rows.backend_distributed_tp.subjects_gloo import predict_gloo_observations
from impl.distributed.parallel_layout import GROUP_KINDS, ParallelDims
from oracles import collectives
from oracles.layout import KINDS, vllm_group_ranks, vllm_group_tables, vllm_rank_group_lookups, vllm_rank_groups


@pytest.mark.cpu
@pytest.mark.parametrize(("sizes", "error", "message"), [
    ({"tp": 0}, ValueError, "tp must be >= 1, got 0"),
    ({"pp": True}, TypeError, "pp must be an int, got True"),
    ({"tp": 4, "dcp": 3}, ValueError, "tp=4 is not a multiple of dcp=3"),
    ({"tp": 2, "pcp": 3, "dcp": 2}, ValueError, r"with pcp=3 > 1, dcp=2 is none of 1, pcp=3, tp\*pcp=6"),
])
def test_layout_oracle_refuses_bad_sizes(sizes: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        vllm_group_ranks("tp", **sizes)


@pytest.mark.cpu
def test_layout_oracle_dcp_spans_pcp_first() -> None:
    assert vllm_group_ranks("dcp", tp=2, pcp=2, dcp=2) == [[0, 2], [1, 3]]
    assert vllm_group_ranks("dcp", dp=2, tp=2, pcp=2, dcp=4) == [[0, 2, 1, 3], [4, 6, 5, 7]]
    assert vllm_group_ranks("dcp", tp=1, pcp=2, dcp=2) == [[0, 1]]
    assert vllm_group_ranks("dcp", dp=2, tp=4, dcp=2) == [[0, 1], [2, 3], [4, 5], [6, 7]]


@pytest.mark.cpu
def test_layout_oracle_tables_and_rank_lookup() -> None:
    tables = vllm_group_tables(external_dp=2, dp=2, pp=2, tp=2)
    assert tuple(tables) == KINDS
    assert tables["dp"] == [[0, 4], [2, 6], [1, 5], [3, 7], [8, 12], [10, 14], [9, 13], [11, 15]]
    assert vllm_rank_groups("ep", dp=2, pp=2, tp=2)[6] == [[2, 3, 6, 7], 2]  # rank 6 is on stage 1
    with pytest.raises(ValueError, match="unknown group kind 'xp'"):
        vllm_group_ranks("xp", tp=2)


@pytest.mark.cpu
def test_sequence_oracle_reads_the_row_as_a_list() -> None:
    """TP-1.9: the DCP group over the whole TP2 x PCP2 block, PCP first, read by index, slice, `in` and index."""
    found = vllm_rank_group_lookups("dcp", 3, tp=2, pcp=2, dcp=4)
    assert found == {"members": [0, 2, 1, 3], "equals_members": True, "length": 4, "at": [0, 2, 1, 3, 0, 2, 1, 3], "refuses_past_ends": True, "reversed": [3, 1, 2, 0],
                     "odd": [2, 3], "contains": [True] * 4, "position": [0, 2, 1, 3]}
    outside = vllm_rank_group_lookups("pp", 1, tp=2, pp=2)
    assert outside["contains"] == [False, True, False, True] and outside["position"] == [None, 0, None, 1]


def test_collective_oracle_refuses_layouts_that_do_not_split_the_world() -> None:
    with pytest.raises(ValueError, match=r"layout 1: the tp groups \[\[0, 1\]\] do not split ranks 0..3"):
        collectives.observe_gloo_world(4, [{"tp": 4}, {"tp": 2}])
    with pytest.raises(ValueError, match="at least one layout"):
        collectives.observe_gloo_world(4, [])
    with pytest.raises(ValueError, match="world_size must be an int >= 1, got True"):
        collectives.observe_gloo_world(True, [{"tp": 1}])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tp=4 is not a multiple of dcp=3"):
        collectives.observe_gloo_world(4, [{"tp": 4, "dcp": 3}])


@pytest.mark.cpu
def test_collective_oracle_derives_vllm_tables_in_group_kind_order() -> None:
    tables = collectives._derive_tables(8, [{"dp": 2, "tp": 4, "dcp": 2}])
    assert tables == [vllm_group_tables(dp=2, tp=4, dcp=2)]
    assert tuple(tables[0]) == GROUP_KINDS
    assert tables[0]["dcp"] == [[0, 1], [2, 3], [4, 5], [6, 7]]


@pytest.mark.cpu
def test_gloo_oracle_builder_passes_plain_sizes_only() -> None:
    call = oracle_layouts({"layouts": [{"dp": 2, "pp": 2, "tp": 2}, {"dp": 2, "tp": 4, "dcp": 2}]})
    assert call.kwargs == {"world_size": 8, "layouts": [{"dp": 2, "pp": 2, "tp": 2}, {"dp": 2, "tp": 4, "dcp": 2}]}
    with pytest.raises(ValueError, match=r"must share a world size, got \[2, 4\]"):
        oracle_layouts({"layouts": [{"tp": 2}, {"tp": 4}]})


@pytest.mark.cpu
@pytest.mark.dist
def test_gloo_world_observes_what_the_impl_predicts() -> None:
    observed = collectives.observe_gloo_world(4, [{"dp": 2, "tp": 2}], timeout_s=60)
    assert observed == predict_gloo_observations([ParallelDims(dp=2, tp=2)])


def _session_members(session: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == session:  # field 6 of stat: the session id
                found.append(int(entry.name))
    return found


@pytest.mark.cpu
@pytest.mark.dist
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to list a session's processes")
def test_a_world_past_its_timeout_is_killed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    launched: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def recording_popen(*args: Any, **kwargs: Any) -> subprocess.Popen:
        launched.append(real_popen(*args, **kwargs))
        return launched[-1]

    monkeypatch.setattr(collectives.subprocess, "Popen", recording_popen)
    with pytest.raises(TimeoutError, match="ran past 0.5 s"):
        collectives.observe_gloo_world(4, [{"dp": 2, "tp": 2}], timeout_s=0.5)
    assert len(launched) == 1 and launched[0].returncode is not None
    assert _session_members(launched[0].pid) == []
    assert os.getsid(0) != launched[0].pid
