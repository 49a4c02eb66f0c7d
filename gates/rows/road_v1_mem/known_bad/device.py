"""Known-bad budgets run through the device profile check (gate profile-on-device); signature of its target.

Each leaves out a large share of the non-KV memory the case puts on the device (the 1 GiB held by another process,
the weights, the 512 MiB outside torch taken before loading), so its pool overfills the request."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..device import run_device_check
from .profile import free_memory_budget, late_baseline_budget, weightless_budget


def device_budget_from_free(geometry: Mapping[str, Any], kv: Mapping[str, Any], gpu_memory_utilization: float,
                            max_num_batched_tokens: int, max_num_seqs: int, foreign_bytes: int,
                            non_torch_bytes: int) -> dict[str, bool]:
    return run_device_check(free_memory_budget, geometry, kv, gpu_memory_utilization, max_num_batched_tokens,
                            max_num_seqs, foreign_bytes, non_torch_bytes)


def device_weights_not_counted(geometry: Mapping[str, Any], kv: Mapping[str, Any], gpu_memory_utilization: float,
                                  max_num_batched_tokens: int, max_num_seqs: int, foreign_bytes: int,
                                  non_torch_bytes: int) -> dict[str, bool]:
    return run_device_check(weightless_budget, geometry, kv, gpu_memory_utilization, max_num_batched_tokens,
                            max_num_seqs, foreign_bytes, non_torch_bytes)


def device_consumed_since_before_profile(geometry: Mapping[str, Any], kv: Mapping[str, Any],
                                          gpu_memory_utilization: float, max_num_batched_tokens: int,
                                          max_num_seqs: int, foreign_bytes: int,
                                          non_torch_bytes: int) -> dict[str, bool]:
    return run_device_check(late_baseline_budget, geometry, kv, gpu_memory_utilization, max_num_batched_tokens,
                            max_num_seqs, foreign_bytes, non_torch_bytes)
