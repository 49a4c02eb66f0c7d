"""MEM-3.1: snapshots, their validation and their field-wise difference."""
from __future__ import annotations

import pytest
from tests.m3.m3_fake_device import ScriptedDevice

from impl.worker.memory_snapshot import GiB, MemorySnapshot, format_gib, measure_snapshot

pytestmark = pytest.mark.cpu


def snap(**changes: object) -> MemorySnapshot:
    fields = dict(device="cuda:0", torch_peak=3 * GiB, free_memory=70 * GiB, total_memory=80 * GiB,
                  torch_memory=6 * GiB, timestamp=1.5)
    fields.update(changes)
    return MemorySnapshot(**fields)  # type: ignore[arg-type]


def test_used_and_non_torch_memory_are_derived_from_free_total_and_reserved() -> None:
    s = snap()
    assert s.cuda_memory == 10 * GiB
    assert s.non_torch_memory == 4 * GiB


def test_difference_is_field_by_field_and_may_be_negative() -> None:
    earlier = snap(torch_peak=2 * GiB, free_memory=75 * GiB, torch_memory=2 * GiB, timestamp=1.0)
    later = snap(torch_peak=5 * GiB, free_memory=71 * GiB, torch_memory=7 * GiB, timestamp=3.5)
    d = later - earlier
    assert (d.torch_peak, d.free_memory, d.cuda_memory, d.torch_memory, d.elapsed) == (3 * GiB, -4 * GiB, 4 * GiB, 5 * GiB, 2.5)
    assert d.non_torch_memory == later.non_torch_memory - earlier.non_torch_memory == -GiB
    assert (earlier - later).free_memory == 4 * GiB


@pytest.mark.parametrize("other, message", [
    (dict(device="cuda:1"), "different devices"),
    (dict(total_memory=81 * GiB), "disagree on total_memory"),
])
def test_snapshots_of_different_devices_do_not_subtract(other: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        snap() - snap(**other)


@pytest.mark.parametrize("changes, error, message", [
    (dict(torch_peak=True), TypeError, r"MemorySnapshot\.torch_peak must be an int >= 0, got True"),
    (dict(free_memory=1.0), TypeError, r"MemorySnapshot\.free_memory must be an int"),
    (dict(torch_memory=-1), ValueError, r"MemorySnapshot\.torch_memory must be an int >= 0, got -1"),
    (dict(total_memory=0, free_memory=0, torch_memory=0), ValueError, r"total_memory must be > 0"),
    (dict(free_memory=81 * GiB), ValueError, r"free_memory \(86973087744\) must be <= total_memory"),
    (dict(torch_memory=11 * GiB), ValueError, r"torch_memory \(11811160064\) must be <= the device memory in use"),
    (dict(device=""), ValueError, r"MemorySnapshot\.device must be a non-empty"),
    (dict(timestamp=float("nan")), ValueError, r"MemorySnapshot\.timestamp must be a finite"),
    (dict(timestamp=True), ValueError, r"MemorySnapshot\.timestamp"),
])
def test_invalid_readings_are_refused_with_the_field_and_value(changes: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        snap(**changes)


def test_measure_reads_the_device_through_the_reader() -> None:
    device = ScriptedDevice(total=16 * GiB, used_by_others=GiB)
    device.allocate(3 * GiB + 5)
    s = measure_snapshot(device, clock=lambda: 42.0)
    assert s == MemorySnapshot(device="cuda:0", torch_peak=3 * GiB + 5, free_memory=16 * GiB - GiB - (3 * GiB + (2 << 20)),
                               total_memory=16 * GiB, torch_memory=3 * GiB + (2 << 20), timestamp=42.0)
    assert s.non_torch_memory == GiB


@pytest.mark.parametrize("num_bytes, shown", [(0, 0.0), (GiB, 1.0), (8 * GiB + 10 * 2**20, 8.01), (-7 * GiB // 2, -3.5)])
def test_format_gib_rounds_to_two_decimals(num_bytes: int, shown: float) -> None:
    assert format_gib(num_bytes) == shown
