"""MEM-3.2: the profiling context's order of operations and the figures of its result, on a scripted device."""
from __future__ import annotations

import gc

import pytest
from tests.m3.m3_fake_device import Clock, ScriptedDevice

from impl.worker.memory_profiler import MemoryProfilingResult, memory_profiling
from impl.worker.memory_snapshot import GiB, MemorySnapshot, measure_snapshot

pytestmark = pytest.mark.cpu
MiB = 1 << 20


def loaded_device() -> tuple[ScriptedDevice, MemorySnapshot, Clock]:
    """1 GiB used by others at start-up; then 2 GiB of weights and 512 MiB outside torch (a communicator)."""
    device, clock = ScriptedDevice(total=80 * GiB, used_by_others=GiB), Clock()
    baseline = measure_snapshot(device, clock)
    device.allocate(2 * GiB)
    device.take_outside_torch(512 * MiB)
    return device, baseline, clock


def profile_workload(device: ScriptedDevice) -> None:
    device.allocate(3 * GiB)  # activations
    device.take_outside_torch(256 * MiB)  # an attention backend's buffers
    device.free(3 * GiB)


def test_result_follows_vllms_accounting() -> None:
    device, baseline, clock = loaded_device()
    with memory_profiling(baseline, weights_memory=2 * GiB, reader=device, clock=clock) as profiling:
        profile_workload(device)
    result = profiling.result
    assert result.before_create is baseline
    assert result.torch_peak_increase == 3 * GiB
    assert result.non_torch_increase == 768 * MiB  # since the start-up baseline, not since before_profile
    # vLLM 0.33.0: the drop in free memory since start-up (weights + everything outside torch) plus the peak's
    # part no longer allocated (the activations)
    assert result.total_consumed == 2 * GiB + 768 * MiB
    assert result.transient_peak_headroom == 3 * GiB
    assert result.non_kv_cache_memory == 2 * GiB + 768 * MiB + 3 * GiB
    assert result.profile_time == pytest.approx(clock.step)
    assert str(result) == ("Memory profiling takes 0.50 seconds. Total non KV cache memory: 5.75GiB; torch peak "
                           "memory increase: 3.0GiB; total consumed (from mem_get_info): 2.75GiB; weights memory: "
                           "2.0GiB.")


def test_weights_memory_is_recorded_not_counted() -> None:
    device, baseline, clock = loaded_device()
    with memory_profiling(baseline, weights_memory=7 * GiB, reader=device, clock=clock) as profiling:
        profile_workload(device)
    assert profiling.result.weights_memory == 7 * GiB
    assert profiling.result.non_kv_cache_memory == 2 * GiB + 768 * MiB + 3 * GiB


def test_entry_and_exit_run_in_vllms_order(monkeypatch: pytest.MonkeyPatch) -> None:
    device, baseline, clock = loaded_device()
    monkeypatch.setattr(gc, "collect", lambda *args: device.calls.append("gc") or 0)
    device.calls.clear()
    with memory_profiling(baseline, weights_memory=2 * GiB, reader=device, clock=clock):
        entry = list(device.calls)
        device.allocate(GiB)
        device.free(GiB)
    measure = ["peak_allocated", "mem_get_info", "reserved"]
    assert entry == ["gc", "empty_cache", "reset_peak", *measure]
    assert device.calls[len(entry):] == ["gc", "empty_cache", *measure]


def test_peak_reset_on_entry_hides_the_loading_peak() -> None:
    device, baseline, clock = loaded_device()
    device.allocate(10 * GiB)  # a loading temporary, freed before the profile
    device.free(10 * GiB)
    with memory_profiling(baseline, weights_memory=2 * GiB, reader=device, clock=clock) as profiling:
        device.allocate(GiB)
        device.free(GiB)
    assert profiling.result.torch_peak_increase == GiB


def test_an_exception_in_the_block_leaves_no_result() -> None:
    device, baseline, clock = loaded_device()
    profiling = memory_profiling(baseline, weights_memory=0, reader=device, clock=clock)
    with pytest.raises(KeyError):
        with profiling:
            raise KeyError("workload failed")
    with pytest.raises(RuntimeError, match="only after the with-block exited normally"):
        profiling.result


def test_the_context_is_single_use_and_checks_its_arguments() -> None:
    device, baseline, clock = loaded_device()
    profiling = memory_profiling(baseline, weights_memory=0, reader=device, clock=clock)
    with profiling:
        pass
    with pytest.raises(RuntimeError, match="single-use"):
        with profiling:
            pass
    with pytest.raises(ValueError, match="baseline is of 'cuda:0' but the reader reads 'cuda:1'"):
        memory_profiling(baseline, 0, ScriptedDevice(total=80 * GiB, device="cuda:1"))
    with pytest.raises(TypeError, match=r"memory_profiling\.weights_memory must be an int"):
        memory_profiling(baseline, True, device)  # type: ignore[arg-type]


def test_result_refuses_snapshots_out_of_order_or_of_another_device() -> None:
    device, baseline, clock = loaded_device()
    later = measure_snapshot(device, clock)
    with pytest.raises(ValueError, match="time order"):
        MemoryProfilingResult(later, baseline, later, weights_memory=0)
    other = MemorySnapshot("cuda:1", 0, 10, 20, 0, later.timestamp)
    with pytest.raises(ValueError, match="different devices"):
        MemoryProfilingResult(baseline, later, other, weights_memory=0)
    with pytest.raises(ValueError, match=r"weights_memory must be an int >= 0, got -1"):
        MemoryProfilingResult(baseline, later, later, weights_memory=-1)
