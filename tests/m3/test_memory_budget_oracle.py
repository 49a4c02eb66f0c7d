"""The ROAD-V1-MEM M3 oracle (oracles/memory_budget.py): its float-faithful utilization cap, replay and block counts.

vLLM computes requested_memory = math.ceil(total * utilization) in double arithmetic (vllm/v1/worker/utils.py,
request_memory). The exact rational ceiling ceil(total x Fraction(utilization)) is one byte higher whenever the
exact product lies just above an integer n and the double product rounds down onto n, i.e. when
0 < frac(total x u) < half a unit in the last place (or on it, with n even). That happens on the gate's own
vllm-docstring-example (80 GiB x 0.9), so the oracle models the rounding step instead; these tests show it
equals the float product there, on every gate case, on ties and on generated inputs.
"""
from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from gates.rows.road_v1_mem.build_profile import raw_snapshots, resolve_input
from oracles import memory_budget as oracle

pytestmark = pytest.mark.cpu
GiB = 1 << 30
GATE_FILE = Path(__file__).resolve().parents[2] / "gates" / "rows" / "road_v1_mem" / "m3.yaml"  # the row's M3 part
PROFILE_GATES = ("profile-kv-budget", "profile-util-blocks")


def exact_ceiling(total: int, utilization: float) -> int:
    return math.ceil(Fraction(total) * Fraction(utilization))


def cap(total: int, utilization: float) -> int:
    """The oracle's cap; free memory is set above it (above 2^53 the rounded product may exceed the total)."""
    return oracle.startup_share({"total_memory": total, "free_memory": 2 * total + 2}, utilization)


def gate_profile_cases() -> dict[str, tuple[int, float]]:
    """(total, utilization) of every case of the two profile gates, fixtures resolved."""
    gates = {g["id"]: g for g in yaml.safe_load(GATE_FILE.read_text(encoding="utf-8"))["gates"]}
    cases = {}
    for gate_id in PROFILE_GATES:
        for name, case in gates[gate_id]["cases"].items():
            route = case.get("upstream")
            if route == "only" or (isinstance(route, dict) and route.get("only")):  # not run against the oracle
                continue
            fields = resolve_input(case["input"])
            baseline = raw_snapshots(fields)["before_create"]
            cases[f"{gate_id}::{name}"] = (baseline["total_memory"], fields["gpu_memory_utilization"])
    return cases


def test_exact_rational_ceiling_disagrees_with_vllm_on_the_docstring_example() -> None:
    total = 80 * GiB
    assert math.ceil(total * 0.9) == 77309411328           # vLLM: the double product rounds down onto 72 GiB
    assert exact_ceiling(total, 0.9) == 77309411328 + 1     # 0.9's double is 0.9 + 2.2e-17: 1.9e-6 bytes above
    assert cap(total, 0.9) == 77309411328                   # the oracle follows vLLM
    assert oracle.startup_share({"total_memory": total, "free_memory": 77309411328}, 0.9) == 77309411328


def test_cap_equals_the_float_product_on_every_gate_case() -> None:
    cases = gate_profile_cases()
    assert len(cases) >= 9
    differ = set()
    for name, (total, utilization) in cases.items():
        assert cap(total, utilization) == math.ceil(total * utilization), name
        if exact_ceiling(total, utilization) != math.ceil(total * utilization):
            differ.add(name)
    # Exact arithmetic would have failed the docstring case, whose expected budget is vLLM's float figure.
    assert "profile-kv-budget::vllm-docstring-example" in differ


@pytest.mark.parametrize("total, utilization, float_ceiling, exact_over", [
    ((2 ** 54 + 2) // 3, 0.75, 2 ** 52, 1),         # exact 2^52 + 0.5: a tie, rounded to the even 2^52
    ((4 * (2 ** 52 + 3) + 2) // 3, 0.75, 2 ** 52 + 4, 0),  # exact 2^52 + 3.5: a tie, rounded up to even 2^52 + 4
    (10 * 2 ** 27, 0.1, 2 ** 27, 1),                # 0.1's double is above 0.1 by less than half an ulp of 2^27
    (2 ** 60 + 1, 0.3, None, None),                 # above 2^53 the int is rounded to a double first, as in Python
    (1, 1.0, 1, 0),
    (0, 0.5, 0, 0),
])
def test_cap_follows_ieee_rounding_on_ties_and_large_totals(total: int, utilization: float,
                                                            float_ceiling: int | None, exact_over: int | None) -> None:
    assert cap(total, utilization) == math.ceil(total * utilization)
    if float_ceiling is not None:
        assert math.ceil(total * utilization) == float_ceiling
        assert exact_ceiling(total, utilization) - float_ceiling == exact_over


@settings(max_examples=500, deadline=None)
@given(total=st.one_of(st.integers(min_value=1 << 30, max_value=1 << 38), st.integers(min_value=0, max_value=1 << 64)),
       utilization=st.one_of(st.floats(min_value=0.0, max_value=1.0, exclude_min=True),
                             st.integers(min_value=1, max_value=1000).map(lambda k: k / 1000)))
def test_cap_equals_the_float_product_and_exact_differs_only_where_rounding_lands_on_an_integer(
        total: int, utilization: float) -> None:
    product = total * utilization
    assert cap(total, utilization) == math.ceil(product)
    if total < 1 << 53:
        exact = Fraction(total) * Fraction(utilization)
        over = exact_ceiling(total, utilization) - math.ceil(product)
        assert over in (0, 1)
        # The two differ exactly when the exact product is not whole and its double is the integer below it.
        assert (over == 1) == (exact.denominator != 1 and product == math.floor(exact))


def test_start_up_refusal_and_utilization_range() -> None:
    with pytest.raises(ValueError):
        oracle.startup_share({"total_memory": 80 * GiB, "free_memory": 79 * GiB}, 0.99)
    for bad in (0.0, -0.1, 1.01, float("nan")):
        with pytest.raises(ValueError):
            cap(GiB, bad)


def test_replay_of_the_docstring_example_leaves_72_gib_less_5() -> None:
    fields = resolve_input({"fixture": "vllm-docstring-example"})
    snaps = raw_snapshots(fields)
    room = oracle.available_kv_cache_bytes(snaps["before_create"], snaps["before_profile"], snaps["after_profile"],
                                           fields["weights_memory"], fields["gpu_memory_utilization"])
    assert room == 77309411328 - 5 * GiB


def test_replay_refuses_an_empty_room_and_mixed_devices() -> None:
    fields = resolve_input({"fixture": "phi4-gptq-a100-util015"})
    snaps = raw_snapshots(fields)
    args = (snaps["before_create"], snaps["before_profile"], snaps["after_profile"], fields["weights_memory"])
    with pytest.raises(ValueError):
        oracle.available_kv_cache_bytes(*args, 0.1)
    other = {**snaps["after_profile"], "device": "cuda:1"}
    with pytest.raises(ValueError):
        oracle.available_kv_cache_bytes(snaps["before_create"], snaps["before_profile"], other,
                                        fields["weights_memory"], 0.15)


@settings(max_examples=300, deadline=None)
@given(room=st.integers(min_value=-5, max_value=1 << 45), per_block=st.integers(min_value=1, max_value=1 << 30))
def test_whole_block_allocation_counts_the_floor(room: int, per_block: int) -> None:
    assert oracle._whole_blocks(room, per_block) == max(room, 0) // per_block


def test_the_phi4_pool_holds_715_blocks() -> None:
    fields = resolve_input({"fixture": "phi4-gptq-a100-util015"})
    snaps = raw_snapshots(fields)
    blocks = oracle.pool_num_blocks(snaps["before_create"], snaps["before_profile"], snaps["after_profile"],
                                    fields["weights_memory"], fields["gpu_memory_utilization"], **fields["kv"],
                                    kv_cache_memory_bytes=0, profiled=True)
    assert blocks == 715


GEOMETRY = st.fixed_dictionaries({"num_layers": st.integers(1, 4), "block_size": st.sampled_from([1, 2, 3, 16]),
                                  "num_kv_heads": st.integers(1, 2), "head_size": st.sampled_from([1, 4]),
                                  "dtype": st.sampled_from(["float16", "float32", "float8_e4m3fn"])})


@settings(max_examples=200, deadline=None)
@given(geometry=GEOMETRY, available=st.integers(min_value=-100, max_value=5000), length=st.integers(1, 300))
def test_length_and_fit_match_a_linear_scan_over_lengths(geometry: dict, available: int, length: int) -> None:
    per_block = geometry["num_layers"] * oracle.measured_block_bytes(
        geometry["block_size"], geometry["num_kv_heads"], geometry["head_size"], geometry["dtype"])

    def need(tokens: int) -> int:  # whole blocks of every layer, as vLLM's max_memory_usage_bytes
        return -(-tokens // geometry["block_size"]) * per_block

    scan = max((n for n in range(1, length + 1) if need(n) <= available), default=0)
    assert oracle.longest_fitting_len(**geometry, available_memory=available, max_model_len=length) == scan
    usable = available - per_block  # vLLM 0.33.0 holds one pool block back, the null block
    if usable <= 0 or need(length) > usable:
        with pytest.raises(ValueError):
            oracle.refuse_if_too_small(**geometry, available_memory=available, max_model_len=length)
    else:
        assert oracle.refuse_if_too_small(**geometry, available_memory=available, max_model_len=length) is None


def test_vllms_own_estimate_cases() -> None:
    model = {"num_layers": 32, "block_size": 16, "num_kv_heads": 32, "head_size": 128, "dtype": "float16"}
    assert oracle.longest_fitting_len(**model, available_memory=8 * GiB, max_model_len=16385) == 16384
    assert oracle.longest_fitting_len(**model, available_memory=8 * GiB - 1, max_model_len=16385) == 16368
    null_block = 8 << 20  # 32 layers x 256 KiB
    assert oracle.refuse_if_too_small(**model, available_memory=8 * GiB + null_block, max_model_len=16384) is None
    for available, length in ((8 * GiB, 16384), (8 * GiB + null_block - 1, 16384), (8 * GiB + null_block, 16385),
                              (null_block, 16)):
        with pytest.raises(ValueError):
            oracle.refuse_if_too_small(**model, available_memory=available, max_model_len=length)
