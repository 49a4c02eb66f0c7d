"""MEM-3.1: the torch.cuda reader refuses to run without CUDA; unified-memory devices read free memory from the OS."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from impl.worker.device_memory import UMA_CAPABILITIES, CudaMemoryReader, _system_available_bytes

pytestmark = pytest.mark.cpu


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_reader_needs_a_cuda_device() -> None:
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        CudaMemoryReader("cuda:0")


def test_unified_memory_devices_are_vllms_three() -> None:
    assert UMA_CAPABILITIES == {(8, 7), (11, 0), (12, 1)}  # Orin, Thor, Spark (GB10)


def test_system_available_memory_is_read_in_bytes(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   65536000 kB\n")
    assert _system_available_bytes(str(meminfo)) == 65536000 * 1024
    meminfo.write_text("MemTotal:       131072000 kB\n")
    with pytest.raises(ValueError, match="has no MemAvailable line"):
        _system_available_bytes(str(meminfo))
