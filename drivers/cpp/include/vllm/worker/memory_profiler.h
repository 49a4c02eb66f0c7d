// The memory profiling result (MEM-3.2): three snapshots of one device and the weights; every other figure is
// derived from them, in bytes.
//
// Ported from impl/worker/memory_profiler.py, which mirrors MemoryProfilingResult of vllm/utils/mem_utils.py.
// (The measuring context manager needs a device and lives with the device helper.)
#pragma once

#include <cstdint>
#include <string>

#include "vllm/worker/memory_snapshot.h"

namespace vllm::worker {

struct MemoryProfilingResult {
  MemorySnapshot before_create;   // the start-up baseline, before the engine allocated anything
  MemorySnapshot before_profile;  // after the weights were loaded, just before the profile run
  MemorySnapshot after_profile;   // after the profile run, its garbage collected and the cache emptied
  int64_t weights_memory = 0;

  // Snapshots valid, weights >= 0, one device, chronological order (Python's __post_init__).
  void Validate() const;

  // Peak torch allocation during the profile over the allocation when it started: the activation peak.
  int64_t torch_peak_increase() const { return (after_profile - before_profile).torch_peak; }
  // Growth of non-torch memory since the start-up baseline (not since before_profile).
  int64_t non_torch_increase() const { return (after_profile - before_create).non_torch_memory; }
  // Everything the instance needs besides the KV cache.
  int64_t non_kv_cache_memory() const { return weights_memory + torch_peak_increase() + non_torch_increase(); }
  double profile_time() const { return (after_profile - before_profile).elapsed; }
  // vLLM's "Memory profiling takes ..." log line.
  std::string ToString() const;
};

}  // namespace vllm::worker
