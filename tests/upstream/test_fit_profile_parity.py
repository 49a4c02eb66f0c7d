"""Message parity of the fit check and the memory profile with vLLM 0.33.0 (MEM-3.2 to MEM-3.6, issue 13).

The upstream gates compare outcomes, and errors only by type; these tests compare the texts too: the port's
refusal messages against vLLM's own (vllm/v1/core/kv_cache_planning.py check_enough_kv_cache_memory,
vllm/v1/worker/utils.py request_memory, vllm/v1/worker/gpu_worker.py determine_available_memory), on the gates'
cases and on generated inputs. Skipped where vLLM 0.33.0 is not installed.
"""
from __future__ import annotations

from typing import Any, Callable

import pytest

from tests.upstream import pinned  # noqa: F401  (skips this module unless the pinned vLLM is installed)

import upstream  # noqa: E402

pytestmark = pytest.mark.upstream

from hypothesis import HealthCheck, given, settings  # noqa: E402

from gates.rows.road_v1_mem.build_fit import fit_call  # noqa: E402
from gates.rows.road_v1_mem.build_profile import budget_call, resolve_input  # noqa: E402
from gates.rows.road_v1_mem.strategies_profile import budget_inputs, fit_inputs_near_the_boundary  # noqa: E402
from gates.rows.road_v1_mem.subjects_profile import available_kv_cache_memory, profiling_result  # noqa: E402
from impl.v1.core.kv_cache_utils import NO_AVAILABLE_MEMORY_MESSAGE, check_enough_kv_cache_memory  # noqa: E402
from upstream import gates_fit, kv_fit, memory  # noqa: E402

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODEL = {"num_layers": 32, "block_size": 16, "num_kv_heads": 32, "head_size": 128, "dtype": "float16"}
NULL_BLOCK = 8 << 20
FIT_BUDGETS = [(8 << 30, 16384), ((8 << 30) + NULL_BLOCK, 16384), ((8 << 30) + NULL_BLOCK - 1, 16384),
               ((8 << 30) + NULL_BLOCK, 16385), (NULL_BLOCK, 16), (NULL_BLOCK + 1, 16), (NULL_BLOCK + (1 << 20), 16),
               (2 * NULL_BLOCK, 16), (0, 1), (-1, 1)]


def _outcome(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        return "value", function(*args, **kwargs)
    except ValueError as exc:
        return "refused", str(exc)


def _port_fit(case: dict[str, Any]) -> tuple[str, Any]:
    return _outcome(fit_call(case).apply, check_enough_kv_cache_memory)


def _vllm_fit(case: dict[str, Any]) -> tuple[str, Any]:
    got = kv_fit.fit_outcome(**case)
    return ("value", None) if got["fits"] else ("refused", got["message"])


@pytest.mark.parametrize(("available", "length"), FIT_BUDGETS)
def test_fit_check_says_what_vllm_says_at_the_null_block_boundaries(available: int, length: int) -> None:
    case = {**MODEL, "available_memory": available, "max_model_len": length}
    assert _port_fit(case) == _vllm_fit(case)


@SETTINGS
@given(case=fit_inputs_near_the_boundary())
def test_fit_check_says_what_vllm_says_on_generated_inputs(case: dict[str, Any]) -> None:
    assert _port_fit(case) == _vllm_fit(case)


def _port_budget(case: dict[str, Any]) -> tuple[str, Any]:
    return _outcome(budget_call(case).apply, available_kv_cache_memory)


def _vllm_budget(case: dict[str, Any]) -> tuple[str, Any]:
    """vLLM's worker, with the two declared deviations applied as gates_fit applies them (after its own checks)."""
    return _outcome(gates_fit.available_kv_cache_memory, resolve_input(case))


@pytest.mark.parametrize("case", [
    {"fixture": "vllm-docstring-example"},
    {"fixture": "phi4-gptq-a100-util015"},
    {"fixture": "vllm-docstring-example", "gpu_memory_utilization": 0.99},   # the start-up refusal
    {"fixture": "phi4-gptq-a100-util015", "gpu_memory_utilization": 0.1},    # a negative budget
], ids=["docstring", "phi4", "startup-refusal", "no-memory-left"])
def test_profile_budget_and_its_messages_are_vllms_on_the_fixtures(case: dict[str, Any]) -> None:
    assert _port_budget(case) == _vllm_budget(case)


@SETTINGS
@given(case=budget_inputs())
def test_profile_budget_and_its_messages_are_vllms_on_generated_snapshots(case: dict[str, Any]) -> None:
    assert _port_budget(case) == _vllm_budget(case)


def test_the_profile_figures_are_vllms_on_the_fixtures() -> None:
    for name in ("vllm-docstring-example", "phi4-gptq-a100-util015"):
        fields = resolve_input({"fixture": name})
        profile = profiling_result(fields["device"], fields["snapshots"], fields["weights_memory"])
        theirs = memory.profile(fields)
        ours = {key: getattr(profile, key) for key in ("non_kv_cache_memory", "torch_peak_increase",
                                                       "non_torch_increase", "total_consumed",
                                                       "transient_peak_headroom", "weights_memory")}
        assert ours == {key: theirs[key] for key in ours}


def test_the_declared_empty_budget_refusal_is_vllms_fit_check_text() -> None:
    with pytest.raises(ValueError) as caught:
        kv_fit.check_enough_kv_cache_memory(**MODEL, available_memory=0, max_model_len=1)
    assert str(caught.value) == NO_AVAILABLE_MEMORY_MESSAGE
