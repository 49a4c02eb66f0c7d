"""The M3 strategies reach every outcome their gates tell apart, and build without a builder error."""
from __future__ import annotations

from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, Phase, find, settings

from gates.rows.road_v1_mem.subjects_profile import available_kv_cache_memory, util_path_num_blocks
from gates.rows.road_v1_mem.build_profile import blocks_call, budget_call
from gates.rows.road_v1_mem.build_fit import fit_call
from gates.rows.road_v1_mem.strategies_profile import blocks_inputs, budget_inputs, fit_inputs
from impl.v1.core.kv_cache_utils import check_enough_kv_cache_memory

pytestmark = [pytest.mark.cpu,
              pytest.mark.filterwarnings("ignore::impl.entrypoints.model_loader.UtilizationNotAppliedWarning")]
SEARCH = settings(max_examples=2000, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck), deadline=None)


def error_text(target: Callable[..., Any], data: dict, build: Callable[[dict], Any]) -> str:
    try:
        build(data).apply(target)
    except ValueError as exc:
        return str(exc)
    return ""


def ends_in(wanted: str, target: Callable[..., Any], build: Callable[[dict], Any]) -> Callable[[dict], bool]:
    """Whether an input makes `target` return (wanted "") or raise a ValueError whose message holds `wanted`."""
    def reaches(data: dict) -> bool:
        text = error_text(target, data, build)
        return wanted in text if wanted else text == ""
    return reaches


@pytest.mark.parametrize("wanted", ["", "on startup is less than", "No available memory"])
def test_budget_inputs_reach_a_budget_a_refusal_and_an_empty_budget(wanted: str) -> None:
    find(budget_inputs(), ends_in(wanted, available_kv_cache_memory, budget_call), settings=SEARCH)


@pytest.mark.parametrize("knob, profiled", [(0, True), (1, True), (0, False)])
def test_blocks_inputs_reach_each_sizing_path(knob: int, profiled: bool) -> None:
    def reaches(data: dict) -> bool:
        return (bool(data["kv_cache_memory_bytes"]) == bool(knob) and data["profiled"] == profiled
                and error_text(util_path_num_blocks, data, blocks_call) == "")
    find(blocks_inputs(), reaches, settings=SEARCH)


@pytest.mark.parametrize("wanted", ["", "No available memory", "estimated maximum model length"])
def test_fit_inputs_reach_a_fit_and_both_refusals(wanted: str) -> None:
    find(fit_inputs(), ends_in(wanted, check_enough_kv_cache_memory, fit_call), settings=SEARCH)
