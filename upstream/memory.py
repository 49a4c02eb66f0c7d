"""vLLM's memory snapshot and profile as plain data, with the device readings faked (ROAD-V1-MEM M3).

A PROFILE CASE is the rows' shape (gates/rows/road_v1_mem/operations.yaml, available-kv-cache-memory), inline:
``{device, gpu_memory_utilization, weights_memory, snapshots: {before_create, before_profile, after_profile}}``,
each snapshot ``{torch_peak, free_memory, total_memory, torch_memory, timestamp}``; a snapshot may add
``torch_allocated`` (bytes torch has allocated now, which vLLM 0.33.0 reads and the rows' cases do not record:
absent, it is taken as ``min(torch_peak, torch_memory)``, the most a reading allows since allocated bytes never
exceed the peak or the reserved bytes; i.e. no cached-but-free workspace beyond what the reading forces).

vLLM's code runs as it is (vllm/utils/mem_utils.py ``MemorySnapshot.measure``, ``memory_profiling``; vllm/v1/worker/
utils.py ``request_memory``); only the device is faked: ``torch.accelerator.memory_stats`` / ``get_memory_info`` /
``memory_reserved`` / ``empty_cache`` / ``reset_peak_memory_stats`` answer the case's readings in the order vLLM
measures (before_create, before_profile, after_profile), ``time.time`` answers the snapshot's timestamp, the
garbage collection before each reading is skipped (it cannot move a faked reading), and the platform is not a UMA
device. The KV budget is then the line of ``Worker.determine_available_memory``
(vllm/v1/worker/gpu_worker.py): ``requested_memory - non_kv_cache_memory`` (no CUDA-graph estimate: none is
captured here); the worker itself needs a model runner and is not run.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, Iterator, Mapping
from unittest import mock

import upstream  # noqa: F401  (environment before vLLM's import)

import torch
import vllm.utils.mem_utils as mem_utils
from vllm.config import CacheConfig
from vllm.platforms import current_platform
from vllm.v1.worker.utils import request_memory

PHASES = ("before_create", "before_profile", "after_profile")
_LOCK = threading.Lock()


class _FakeDevice:
    """The readings of one snapshot at a time; ``current`` is the one the next ``measure()`` sees. With
    ``follow_profile`` the device moves to before_profile when ``memory_profiling`` resets the peak statistics (just
    before it measures), as a worker run needs; the stand-in model runner's ``profile_run`` moves it on."""

    def __init__(self, snapshots: Mapping[str, Mapping[str, Any]], follow_profile: bool = False) -> None:
        self.readings = [dict(snapshots[phase]) for phase in PHASES]
        self.current = self.readings[0]
        self.follow_profile = follow_profile

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        if self.follow_profile:
            self.advance("before_profile")

    def advance(self, phase: str) -> None:
        self.current = self.readings[PHASES.index(phase)]

    def memory_stats(self, device: Any = None) -> dict[str, int]:
        reading = self.current
        allocated = reading.get("torch_allocated", min(reading["torch_peak"], reading["torch_memory"]))
        return {"allocated_bytes.all.peak": reading["torch_peak"], "allocated_bytes.all.current": allocated}

    def get_memory_info(self, device: Any = None) -> tuple[int, int]:
        return self.current["free_memory"], self.current["total_memory"]

    def memory_reserved(self, device: Any = None) -> int:
        return self.current["torch_memory"]

    def time(self) -> float:
        return float(self.current["timestamp"])


# memory_profiling collects garbage before each reading so that freed tensors leave the device; the readings here
# are the case's, which no collection can change, and a full collection over vLLM's heap costs ~0.65 s a call.
_NO_COLLECTOR = SimpleNamespace(collect=lambda generation=2: 0)


@contextmanager
def _faked(snapshots: Mapping[str, Mapping[str, Any]], follow_profile: bool = False) -> Iterator[_FakeDevice]:
    device = _FakeDevice(snapshots, follow_profile)
    fake_time = SimpleNamespace(time=device.time)
    with _LOCK, \
            mock.patch.object(torch.accelerator, "memory_stats", device.memory_stats), \
            mock.patch.object(torch.accelerator, "get_memory_info", device.get_memory_info), \
            mock.patch.object(torch.accelerator, "memory_reserved", device.memory_reserved), \
            mock.patch.object(torch.accelerator, "empty_cache", lambda *a, **k: None), \
            mock.patch.object(torch.accelerator, "reset_peak_memory_stats", device.reset_peak_memory_stats), \
            mock.patch.object(mem_utils, "time", fake_time), \
            mock.patch.object(mem_utils, "gc", _NO_COLLECTOR), \
            mock.patch.object(type(current_platform), "is_integrated_gpu", classmethod(lambda cls, *a: False)):
        yield device


def _snapshot_view(snapshot: Any) -> dict[str, Any]:
    return {name: getattr(snapshot, name) for name in (
        "torch_peak", "torch_allocated", "free_memory", "total_memory", "cuda_memory", "torch_memory",
        "non_torch_memory", "timestamp")}


def snapshot(device: str, reading: Mapping[str, Any]) -> dict[str, Any]:
    """``MemorySnapshot(device=device)`` measuring one faked reading (vllm/utils/mem_utils.py): every field vLLM
    derives (cuda_memory = total - free, non_torch_memory = cuda_memory - torch_memory, ...)."""
    with _faked({phase: reading for phase in PHASES}):
        return _snapshot_view(mem_utils.MemorySnapshot(device=device))


def profile(case: Mapping[str, Any]) -> dict[str, Any]:
    """The profile of a PROFILE CASE through vLLM's own code (vllm/utils/mem_utils.py, vllm/v1/worker/utils.py):

    ``requested_memory`` (``request_memory``: ceil(total * utilization), or its start-up ValueError), the
    ``MemoryProfilingResult`` fields (``non_kv_cache_memory = total_consumed + transient_peak_headroom`` with
    ``total_consumed = before_create.free - after_profile.free`` and ``transient_peak_headroom =
    after_profile.torch_peak - after_profile.torch_allocated``; weights_memory is recorded, not subtracted), and
    ``available_kv_cache_memory = requested_memory - non_kv_cache_memory`` (gpu_worker.py).
    """
    snapshots = case["snapshots"]
    cache_config = CacheConfig(gpu_memory_utilization=case["gpu_memory_utilization"])
    with _faked(snapshots) as device:
        init_snapshot = mem_utils.MemorySnapshot(device=case["device"])
        requested = request_memory(init_snapshot, cache_config)
        device.advance("before_profile")
        with mem_utils.memory_profiling(init_snapshot, weights_memory=case.get("weights_memory", 0)) as result:
            device.advance("after_profile")
    return {
        "requested_memory": int(requested),
        "non_kv_cache_memory": int(result.non_kv_cache_memory),
        "torch_peak_increase": int(result.torch_peak_increase),
        "non_torch_increase": int(result.non_torch_increase),
        "total_consumed": int(result.total_consumed),
        "transient_peak_headroom": int(result.transient_peak_headroom),
        "weights_memory": int(result.weights_memory),
        "profile_time": float(result.profile_time),
        "available_kv_cache_memory": int(requested - result.non_kv_cache_memory),
        "before_create": _snapshot_view(result.before_create),
        "before_profile": _snapshot_view(result.before_profile),
        "after_profile": _snapshot_view(result.after_profile),
    }


def available_kv_cache_memory(case: Mapping[str, Any]) -> int:
    """``requested_memory - non_kv_cache_memory`` of :func:`profile` (vllm/v1/worker/gpu_worker.py's formula on
    vllm/utils/mem_utils.py's profile); the start-up refusal of ``request_memory`` propagates. vLLM refuses a
    budget <= 0 later, in ``check_enough_kv_cache_memory`` (upstream/kv_fit.py), not here."""
    return profile(case)["available_kv_cache_memory"]


def requested_memory(device: str, total_memory: int, free_memory: int, gpu_memory_utilization: float,
                     external_weight_memory: int = 0) -> int:
    """``request_memory(init_snapshot, cache_config, external_weight_memory)`` (vllm/v1/worker/utils.py) on a
    faked start-up reading: ceil(total * utilization), or vLLM's start-up ValueError."""
    reading = {"torch_peak": 0, "free_memory": free_memory, "total_memory": total_memory, "torch_memory": 0,
               "timestamp": 0.0}
    cache_config = CacheConfig(gpu_memory_utilization=gpu_memory_utilization)
    with _faked({phase: reading for phase in PHASES}):
        init_snapshot = mem_utils.MemorySnapshot(device=device)
        return int(request_memory(init_snapshot, cache_config, external_weight_memory))


def worker_available_memory(case: Mapping[str, Any], kv_cache_memory_bytes: int = 0) -> int:
    """``Worker.determine_available_memory`` (vllm/v1/worker/gpu_worker.py) itself, run unbound on a stand-in worker
    over a PROFILE CASE: the faked device, ``init_snapshot`` and ``requested_memory`` as ``init_device`` sets them
    (``request_memory``, vllm/v1/worker/utils.py; its start-up ValueError propagates), a model runner whose
    ``profile_run`` only moves the device to after_profile and whose weights are ``weights_memory``, and
    ``kv_cache_memory_bytes`` (0: unset; set, the worker returns it after the profile run, measuring nothing).
    vLLM's own profiling check (an ``assert`` that free memory did not grow) raises
    ``AssertionError``; no CUDA graphs are profiled on this platform.
    """
    return worker_run(case, kv_cache_memory_bytes)[0]


def worker_run(case: Mapping[str, Any], kv_cache_memory_bytes: int = 0) -> tuple[int, int]:
    """:func:`worker_available_memory`'s run, with how many times the worker called its model runner's
    ``profile_run`` before it returned the budget: ``(budget, profile runs)``."""
    from vllm.v1.worker.gpu_worker import Worker

    from upstream._config import vllm_config

    config = vllm_config(max_model_len=4096, block_size=16)
    cache_config = CacheConfig(gpu_memory_utilization=case["gpu_memory_utilization"],
                               kv_cache_memory_bytes=kv_cache_memory_bytes or None)
    config.cache_config = cache_config
    runs = []
    with _faked(case["snapshots"], follow_profile=True) as device:
        init_snapshot = mem_utils.MemorySnapshot(device=case["device"])

        def profile_run(randomize_inputs: bool = False) -> None:
            runs.append(randomize_inputs)
            device.advance("after_profile")

        runner = SimpleNamespace(model_memory_usage=case.get("weights_memory", 0), profile_run=profile_run,
                                 profile_cudagraph_memory=lambda: 0)
        worker = SimpleNamespace(vllm_config=config, cache_config=cache_config, model_config=config.model_config,
                                 parallel_config=config.parallel_config, init_snapshot=init_snapshot,
                                 requested_memory=request_memory(init_snapshot, cache_config), model_runner=runner,
                                 randomize_dummy_inputs=False, use_v2_model_runner=False)
        worker._scoped_allocator_max_split = Worker._scoped_allocator_max_split.__get__(worker)
        return int(Worker.determine_available_memory(worker)), len(runs)
