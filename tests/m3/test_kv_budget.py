"""MEM-3.3 / MEM-3.4: the requested memory, the start-up refusal and the KV budget."""
from __future__ import annotations

import math

import pytest

from impl.v1.core.kv_cache_utils import NO_AVAILABLE_MEMORY_MESSAGE
from impl.worker.kv_budget import KVCacheBudget, kv_cache_budget, request_memory
from impl.worker.memory_profiler import MemoryProfilingResult
from impl.worker.memory_snapshot import GiB, MemorySnapshot

pytestmark = pytest.mark.cpu


def startup(free: int, total: int) -> MemorySnapshot:
    return MemorySnapshot("cuda:0", torch_peak=0, free_memory=free, total_memory=total, torch_memory=0, timestamp=0.0)


def test_requested_memory_is_the_rounded_up_share_of_total_not_free_memory() -> None:
    assert request_memory(startup(free=79 * GiB, total=80 * GiB), 0.9) == 72 * GiB
    assert request_memory(startup(free=GiB + 1, total=GiB + 1), 0.5) == GiB // 2 + 1  # 536870912.5 rounds up
    assert request_memory(startup(free=10, total=10), 1) == 10


def test_requested_memory_is_the_ceiling_of_the_double_product() -> None:
    total = 85094039552
    assert request_memory(startup(free=total, total=total), 0.15) == math.ceil(total * 0.15) == 12764105933


def test_startup_refusal_carries_vllms_message() -> None:
    with pytest.raises(ValueError) as caught:
        request_memory(startup(free=79 * GiB, total=80 * GiB), 0.99)
    assert str(caught.value) == (
        "Free memory on device cuda:0 (79.0/80.0 GiB) on startup is less than desired GPU memory utilization "
        "(0.99, 79.2 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")


def test_free_memory_exactly_at_the_request_starts() -> None:
    assert request_memory(startup(free=40 * GiB, total=80 * GiB), 0.5) == 40 * GiB
    with pytest.raises(ValueError, match="on startup is less than"):
        request_memory(startup(free=40 * GiB - 1, total=80 * GiB), 0.5)


@pytest.mark.parametrize("value, error", [(0, ValueError), (0.0, ValueError), (-0.5, ValueError), (1.01, ValueError),
                                          (float("nan"), ValueError), (True, TypeError), ("0.9", TypeError)])
def test_utilization_outside_the_open_closed_unit_interval_is_refused(value: object, error: type) -> None:
    with pytest.raises(error, match=r"request_memory\.gpu_memory_utilization must be a finite float in \(0, 1\]"):
        request_memory(startup(free=10, total=10), value)  # type: ignore[arg-type]


def test_budget_is_requested_less_non_kv_and_refuses_nothing_left() -> None:
    assert KVCacheBudget(requested_memory=72 * GiB, non_kv_cache_memory=5 * GiB).available_kv_cache_memory == 67 * GiB
    assert str(KVCacheBudget(72 * GiB, 5 * GiB)) == "Available KV cache memory: 67.0 GiB"
    assert KVCacheBudget(10, 9).available_kv_cache_memory == 1
    for non_kv in (10, 11):
        with pytest.raises(ValueError) as caught:
            KVCacheBudget(10, non_kv)
        assert str(caught.value) == NO_AVAILABLE_MEMORY_MESSAGE
    with pytest.raises(TypeError, match=r"KVCacheBudget\.non_kv_cache_memory must be an int"):
        KVCacheBudget(10, False)
    with pytest.raises(TypeError, match=r"KVCacheBudget\.requested_memory must be an int"):
        KVCacheBudget(10.0, 1)  # type: ignore[arg-type]


def test_budget_from_a_profile_uses_its_non_kv_memory() -> None:
    base = startup(free=79 * GiB, total=80 * GiB)
    before = MemorySnapshot("cuda:0", 2 * GiB, 76 * GiB + GiB // 2, 80 * GiB, 2 * GiB, 1.0)
    after = MemorySnapshot("cuda:0", 4 * GiB, 75 * GiB, 80 * GiB, 3 * GiB, 2.0)
    profile = MemoryProfilingResult(base, before, after, weights_memory=2 * GiB)
    assert kv_cache_budget(72 * GiB, profile) == KVCacheBudget(72 * GiB, 5 * GiB)
    with pytest.raises(TypeError, match="profile must be a MemoryProfilingResult"):
        kv_cache_budget(72 * GiB, object())  # type: ignore[arg-type]
