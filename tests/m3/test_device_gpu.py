"""The M3 pieces on a real CUDA device (MEM-3.1, MEM-3.2, MEM-3.8, MEM-3.9); skipped without one."""
from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is False)")]
MiB = 1 << 20


@pytest.fixture
def reader():
    from impl.worker.device_memory import CudaMemoryReader

    torch.cuda.empty_cache()
    return CudaMemoryReader("cuda")


def test_a_snapshot_of_the_device_is_consistent(reader) -> None:
    from impl.worker.memory_snapshot import measure_snapshot

    s = measure_snapshot(reader)
    assert s.device == f"cuda:{torch.cuda.current_device()}"
    assert 0 < s.free_memory <= s.total_memory and 0 <= s.torch_memory <= s.cuda_memory


def test_profiling_sees_an_activation_and_memory_outside_torch(reader) -> None:
    from gates.rows.road_v1_mem.device import memory_outside_torch
    from impl.worker.memory_profiler import memory_profiling
    from impl.worker.memory_snapshot import measure_snapshot

    baseline = measure_snapshot(reader)
    with memory_outside_torch(256 * MiB):
        with memory_profiling(baseline, weights_memory=0, reader=reader) as profiling:
            activation = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
            del activation
        result = profiling.result
    assert result.torch_peak_increase >= 64 * MiB
    assert result.non_torch_increase >= 256 * MiB


def test_the_decoder_runs_on_the_device_and_its_weights_are_what_torch_allocated() -> None:
    from impl.worker.profile_workload import DecoderGeometry, build_profile_decoder, profile_run, weights_bytes

    geometry = DecoderGeometry(vocab_size=1000, hidden_size=256, num_layers=2, num_attention_heads=8, num_kv_heads=2,
                               head_size=32, intermediate_size=512, dtype=torch.bfloat16)
    before = torch.cuda.memory_allocated()
    model = build_profile_decoder(geometry, "cuda")
    assert torch.cuda.memory_allocated() - before >= weights_bytes(model)
    sampled = profile_run(model, 512, 16)
    assert sampled.shape == (16,) and sampled.is_cuda


def test_a_small_pool_fits_the_budget_exactly() -> None:
    from gates.rows.road_v1_mem.device import CHECKS, device_profile_check

    checks = device_profile_check(
        geometry={"vocab_size": 8000, "hidden_size": 1024, "num_layers": 2, "num_attention_heads": 8,
                  "num_kv_heads": 2, "head_size": 128, "intermediate_size": 2816, "dtype": "bfloat16"},
        kv={"num_layers": 8, "block_size": 16, "num_kv_heads": 2, "head_size": 128, "dtype": "bfloat16"},
        gpu_memory_utilization=0.03, max_num_batched_tokens=2048, max_num_seqs=16,
        foreign_bytes=256 * MiB, non_torch_bytes=128 * MiB)
    assert checks == {name: True for name in CHECKS}
