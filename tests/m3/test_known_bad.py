"""Every M3 known-bad is told from the correct implementation by a named case of its gate."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from gates.rows.road_v1_mem.subjects_profile import available_kv_cache_memory, util_path_num_blocks
from vllm_gates import Call
from gates.rows.road_v1_mem.build_profile import blocks_call, budget_call
from gates.rows.road_v1_mem.build_fit import fit_call
from gates.rows.road_v1_mem.known_bad import profile as bad
from gates.rows.road_v1_mem.known_bad import fit as bad_kv
from impl.v1.core.kv_cache_utils import check_enough_kv_cache_memory, estimate_max_model_len

pytestmark = [pytest.mark.cpu,
              pytest.mark.filterwarnings("ignore::impl.entrypoints.model_loader.UtilizationNotAppliedWarning")]
VLLM_MODEL = {"num_layers": 32, "block_size": 16, "num_kv_heads": 32, "head_size": 128, "dtype": "float16"}


def outcome(target: Callable[..., Any], call: Call) -> tuple[str, Any]:
    try:
        return "value", call.apply(target)
    except Exception as exc:  # the exception is the outcome
        return type(exc).__name__, str(exc)


def told_apart(good: Callable[..., Any], wrong: Callable[..., Any], calls: list[Call]) -> bool:
    return any(outcome(good, call) != outcome(wrong, call) for call in calls)


MiB = 1 << 20
# 64 MiB less free after the profile, 72 MiB peak of which 40 MiB still allocated (64 MiB reserved): vLLM 0.33.0's
# headroom is the peak less what is allocated, and the pre-0.33 formula (weights + peak increase) differs here.
HEADROOM_CASE = {"device": "cuda:0", "gpu_memory_utilization": 0.5, "weights_memory": 32 * MiB, "snapshots": {
    "before_create": {"torch_peak": 0, "torch_allocated": 0, "free_memory": 1024 * MiB, "total_memory": 1024 * MiB,
                      "torch_memory": 0, "timestamp": 0.0},
    "before_profile": {"torch_peak": 32 * MiB, "torch_allocated": 32 * MiB, "free_memory": 992 * MiB,
                       "total_memory": 1024 * MiB, "torch_memory": 32 * MiB, "timestamp": 1.0},
    "after_profile": {"torch_peak": 72 * MiB, "torch_allocated": 40 * MiB, "free_memory": 960 * MiB,
                      "total_memory": 1024 * MiB, "torch_memory": 64 * MiB, "timestamp": 2.0}}}
# another process held 64 MiB at start-up and released it during the profile: free memory grew
FREE_GREW_CASE = {**HEADROOM_CASE, "weights_memory": 0, "snapshots": {
    phase: {**HEADROOM_CASE["snapshots"]["before_create"], "free_memory": free, "timestamp": float(i)}
    for i, (phase, free) in enumerate([("before_create", 960 * MiB), ("before_profile", 1024 * MiB),
                                       ("after_profile", 1024 * MiB)])}}
BUDGET_CASES = [budget_call({"fixture": "vllm-docstring-example"}), budget_call({"fixture": "phi4-gptq-a100-util015"}),
                budget_call(HEADROOM_CASE), budget_call(FREE_GREW_CASE)]
BLOCK_CASES = [blocks_call({"fixture": "phi4-gptq-a100-util015"})]
NULL_BLOCK = 8 * MiB  # one pool block of VLLM_MODEL: 32 layers x 256 KiB
FIT_CASES = [fit_call({**VLLM_MODEL, "available_memory": (8 << 30) + NULL_BLOCK, "max_model_len": 16384}),
             fit_call({**VLLM_MODEL, "available_memory": 8 << 30, "max_model_len": 16384}),
             fit_call({**VLLM_MODEL, "available_memory": (8 << 30) + NULL_BLOCK, "max_model_len": 16385}),
             fit_call({**VLLM_MODEL, "available_memory": NULL_BLOCK, "max_model_len": 16}),
             fit_call({**VLLM_MODEL, "available_memory": 0, "max_model_len": 1})]
ESTIMATE_CASES = [fit_call({**VLLM_MODEL, "available_memory": 8 << 30, "max_model_len": 16383}),
                  fit_call({**VLLM_MODEL, "available_memory": (8 << 30) - 1, "max_model_len": 16385}),
                  fit_call({**VLLM_MODEL, "available_memory": 1 << 20, "max_model_len": 16385})]


@pytest.mark.parametrize("good, wrong, calls", [
    (available_kv_cache_memory, bad.budget_from_free, BUDGET_CASES),
    (available_kv_cache_memory, bad.weights_not_counted, BUDGET_CASES),
    (available_kv_cache_memory, bad.consumed_since_before_profile, BUDGET_CASES),
    (available_kv_cache_memory, bad.pre_033_formula, BUDGET_CASES),
    (available_kv_cache_memory, bad.headroom_from_reservation, BUDGET_CASES),
    (available_kv_cache_memory, bad.free_growth_accepted, BUDGET_CASES),
    (util_path_num_blocks, bad.blocks_budget_from_free, BLOCK_CASES),
    (util_path_num_blocks, bad.blocks_weights_not_counted, BLOCK_CASES),
    (util_path_num_blocks, bad.blocks_consumed_since_before_profile, BLOCK_CASES),
    (util_path_num_blocks, bad.blocks_profile_ignored, BLOCK_CASES),
    (check_enough_kv_cache_memory, bad_kv.fit_check_one_layer, FIT_CASES),
    (check_enough_kv_cache_memory, bad_kv.fit_check_skips_empty_budget, FIT_CASES),
    (check_enough_kv_cache_memory, bad_kv.fit_check_refuses_exact_fit, FIT_CASES),
    (check_enough_kv_cache_memory, bad_kv.fit_check_without_null_block, FIT_CASES),
    (check_enough_kv_cache_memory, bad_kv.fit_check_null_block_of_one_layer, FIT_CASES),
    (estimate_max_model_len, bad_kv.estimate_counts_partial_blocks, ESTIMATE_CASES),
    (estimate_max_model_len, bad_kv.estimate_ignores_max_model_len, ESTIMATE_CASES),
    (estimate_max_model_len, bad_kv.estimate_never_zero, ESTIMATE_CASES),
], ids=lambda v: getattr(v, "__name__", ""))
def test_known_bad_is_told_apart(good: Callable[..., Any], wrong: Callable[..., Any], calls: list[Call]) -> None:
    assert told_apart(good, wrong, calls)


def test_each_mistake_moves_the_docstring_budget_by_what_it_forgets() -> None:
    call = BUDGET_CASES[0]
    right = call.apply(available_kv_cache_memory)
    assert right == 67 << 30
    assert call.apply(bad.weights_not_counted) - right == 2 << 30                 # the 2 GiB of weights
    assert call.apply(bad.consumed_since_before_profile) - right == 5 << 29       # weights + 0.5 GiB NCCL at load
    assert call.apply(bad.pre_033_formula) == right                               # both formulas give 5 GiB here
    assert right - call.apply(bad.budget_from_free) == 966367641                  # ceil(80 GiB x 0.9) - ceil(79 GiB x 0.9)


def test_the_pre_033_formula_misses_the_peak_still_allocated() -> None:
    call = budget_call(HEADROOM_CASE)
    assert call.apply(available_kv_cache_memory) == 512 * MiB - 64 * MiB - 32 * MiB
    assert call.apply(bad.pre_033_formula) == 512 * MiB - (32 + 40 + 0) * MiB   # weights + peak increase + non-torch
    assert call.apply(bad.headroom_from_reservation) == 512 * MiB - 64 * MiB - 8 * MiB


def test_phi4_known_bads_miss_the_logged_715_blocks() -> None:
    call = BLOCK_CASES[0]
    assert call.apply(util_path_num_blocks) == 715
    assert [call.apply(f) for f in (bad.blocks_budget_from_free, bad.blocks_weights_not_counted,
                                    bad.blocks_consumed_since_before_profile)] == [694, 3504, 3525]
