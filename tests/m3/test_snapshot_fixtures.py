"""The recorded snapshot fixtures reproduce every figure their source wrote down."""
from __future__ import annotations

import pytest

from gates.rows.road_v1_mem.build_profile import FIXTURE_DIR, load_fixture, resolve_input
from gates.rows.road_v1_mem.subjects_profile import kv_probe, profiling_result
from impl.v1.kv_cache_interface import kv_bytes_per_block
from impl.worker.kv_budget import kv_cache_budget, request_memory
from impl.worker.memory_snapshot import format_gib

pytestmark = pytest.mark.cpu
FIXTURES = sorted(p.stem for p in FIXTURE_DIR.glob("*.yaml"))


def test_there_are_fixtures() -> None:
    assert FIXTURES == ["phi4-gptq-a100-util015", "vllm-docstring-example"]


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_reproduces_its_logged_figures(name: str) -> None:
    fields = resolve_input({"fixture": name})
    assert fields["source"].startswith(("vllm-project/vllm ", "xinyuwei-david/david-share "))
    profile = profiling_result(fields["device"], fields["snapshots"], fields["weights_memory"])
    requested = request_memory(profile.before_create, fields["gpu_memory_utilization"])
    budget = kv_cache_budget(requested, profile)
    figures = {
        "total_memory": format_gib(profile.before_create.total_memory),
        "requested_memory": format_gib(requested),
        "weights_memory": format_gib(profile.weights_memory),
        "torch_peak_increase": format_gib(profile.torch_peak_increase),
        "non_torch_increase": format_gib(profile.non_torch_increase),
        "non_kv_cache_memory": format_gib(profile.non_kv_cache_memory),
        "available_kv_cache_memory": format_gib(budget.available_kv_cache_memory),
        "profile_time": round(profile.profile_time, 2),
    }
    if "kv" in fields:
        figures["num_gpu_blocks"] = budget.available_kv_cache_memory // kv_bytes_per_block(kv_probe(fields["kv"]))
    logged = fields["logged"]
    assert logged and {key: figures[key] for key in logged} == logged


def test_phi4_block_is_3276800_bytes() -> None:
    assert kv_bytes_per_block(kv_probe(load_fixture("phi4-gptq-a100-util015")["kv"])) == 3_276_800


@pytest.mark.parametrize("data, message", [
    ({"fixture": "no-such-fixture"}, "no file"),
    ({"fixture": "../etc/passwd"}, "fixture must be a name"),
    ({"fixture": "vllm-docstring-example", "utilisation": 0.5}, r"unknown keys \['utilisation'\]"),
    ({"device": "cuda:0"}, "missing keys"),
])
def test_bad_case_inputs_are_definition_errors(data: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_input(data)
