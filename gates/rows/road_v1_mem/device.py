"""The M3 profile run on a CUDA device, and the checks that the pool it sizes fits the requested memory (MEM-3.9).

The run: memory held by "another process" before start-up; the start-up snapshot; buffers outside torch (as a
communicator's) after it; the decoder loaded and profiled at max_num_batched_tokens; the pool resolved and
allocated; a second run with the pool in place. The checks read torch.cuda directly, not through impl. The
footprint is counted as vLLM 0.33.0's profile counts (vllm/utils/mem_utils.py): device memory in use above the
start-up reading (mem_get_info, so torch's cached segments count) plus the run's transient peak allocation.
"""
from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import os
from collections.abc import Iterator, Mapping
from typing import Any, Callable

import torch

from impl.worker.gpu_worker import BudgetFn, determine_available_memory
from impl.entrypoints.model_loader import EngineParams, resolve_num_blocks
from impl.v1.kv_cache_interface import kv_bytes_per_block
from impl.worker.device_memory import CudaMemoryReader
from impl.worker.memory_profiler import memory_profiling
from impl.worker.memory_snapshot import measure_snapshot
from impl.worker.profile_workload import DecoderGeometry, build_profile_decoder, profile_run

from .subjects_profile import kv_probe

CHECKS = ("pool_within_budget", "one_more_block_exceeds", "activation_peak_positive")


def _driver() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise RuntimeError(f"the CUDA driver library libcuda.so.1 cannot be loaded: {exc}") from exc
    lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
    return lib


@contextlib.contextmanager
def memory_outside_torch(num_bytes: int) -> Iterator[None]:
    """Hold `num_bytes` of device memory through the CUDA driver, invisible to torch's allocator."""
    if num_bytes == 0:
        yield
        return
    lib = _driver()
    pointer = ctypes.c_uint64()
    status = lib.cuMemAlloc_v2(ctypes.byref(pointer), num_bytes)
    if status != 0:
        raise RuntimeError(f"cuMemAlloc_v2 of {num_bytes} bytes failed with CUresult {status}")
    try:
        yield
    finally:
        lib.cuMemFree_v2(pointer)


def report_figures(line: str) -> None:
    """Print the figures of a device run, and append them to $GATES_M3_DEVICE_LOG when set (ci/gpu.sh keeps it)."""
    print(line)
    log = os.environ.get("GATES_M3_DEVICE_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


def run_device_check(budget_fn: BudgetFn, geometry: Mapping[str, Any], kv: Mapping[str, Any],
                     gpu_memory_utilization: float, max_num_batched_tokens: int, max_num_seqs: int,
                     foreign_bytes: int, non_torch_bytes: int,
                     report: Callable[[str], None] = report_figures) -> dict[str, bool]:
    """Profile, size and allocate the pool with `budget_fn`; return which MEM-3.9 checks hold."""
    if not torch.cuda.is_available():
        raise RuntimeError("the device profile check needs a CUDA device")
    device = torch.device("cuda", torch.cuda.current_device())
    torch.zeros(1, device=device)  # the primary context is current on this thread from here on
    decoder_geometry = DecoderGeometry(**{**geometry, "dtype": getattr(torch, geometry["dtype"])})
    probe = kv_probe(kv)
    reader = CudaMemoryReader(device)
    gc.collect()
    torch.cuda.empty_cache()
    with memory_outside_torch(foreign_bytes):
        baseline = measure_snapshot(reader)
        free, total = torch.cuda.mem_get_info(device)
        requested = math.ceil(total * gpu_memory_utilization)
        allocated_at_start = torch.cuda.memory_allocated(device)
        with memory_outside_torch(non_torch_bytes):
            model = build_profile_decoder(decoder_geometry, device)
            weights = torch.cuda.memory_allocated(device) - allocated_at_start
            with memory_profiling(baseline, weights, reader) as profiling:
                profile_run(model, max_num_batched_tokens, max_num_seqs)
            result = profiling.result
            params = EngineParams(gpu_memory_utilization=gpu_memory_utilization)
            num_blocks = resolve_num_blocks(params, probe, budget_fn(result, gpu_memory_utilization))
            per_block = kv_bytes_per_block(probe)
            pool = torch.empty(num_blocks * per_block, dtype=torch.uint8, device=device)
            # vLLM 0.33.0's accounting: memory in use above the start-up reading (free memory, the pool in place),
            # plus the second run's transient peak above what was allocated before it.
            free_with_pool = torch.cuda.mem_get_info(device)[0]
            allocated_before_run = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
            profile_run(model, max_num_batched_tokens, max_num_seqs)
            transient = torch.cuda.max_memory_allocated(device) - allocated_before_run
            footprint = (free - free_with_pool) + transient
            del pool, model
    gc.collect()
    torch.cuda.empty_cache()
    report(f"{getattr(budget_fn, '__name__', budget_fn)} on {device}: total {total}, free at start {free}, requested {requested}, weights {weights}, "
           f"activation peak {result.torch_peak_increase}, non-torch growth {result.non_torch_increase}, "
           f"consumed {result.total_consumed}, transient headroom {result.transient_peak_headroom}, "
           f"{num_blocks} blocks x {per_block} bytes, footprint {footprint}, headroom {requested - footprint}, "
           f"profile {result.profile_time:.3f} s")
    return {"pool_within_budget": bool(footprint <= requested),  # plain bools whatever the readings' number types
            "one_more_block_exceeds": bool(footprint + per_block > requested),
            "activation_peak_positive": bool(result.torch_peak_increase > 0)}


def device_profile_check(geometry: Mapping[str, Any], kv: Mapping[str, Any], gpu_memory_utilization: float,
                         max_num_batched_tokens: int, max_num_seqs: int, foreign_bytes: int,
                         non_torch_bytes: int) -> dict[str, bool]:
    """Gate target of profile-on-device: the MEM-3.9 checks for the correct budget."""
    return run_device_check(determine_available_memory, geometry, kv, gpu_memory_utilization, max_num_batched_tokens, max_num_seqs,
                            foreign_bytes, non_torch_bytes)
