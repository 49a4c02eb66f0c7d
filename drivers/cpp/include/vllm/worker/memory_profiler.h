// The memory profiling result (MEM-3.2): three snapshots of one device and the weights; every other figure is
// derived from them, in bytes.
//
// Ported from impl/worker/memory_profiler.py, which mirrors MemoryProfilingResult of vllm/utils/mem_utils.py
// (0.33.0: non-KV memory = the drop in free memory since start-up + the peak not still allocated).
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
  // Device memory taken since the start-up baseline, read off free memory: before_create.free - after_profile.free.
  int64_t total_consumed() const { return -(after_profile - before_create).free_memory; }
  // The profile's peak allocation above what torch still holds allocated after it.
  int64_t transient_peak_headroom() const { return after_profile.torch_peak - after_profile.allocated(); }
  // Everything the instance needs besides the KV cache (vLLM 0.33.0): total_consumed + transient headroom.
  int64_t non_kv_cache_memory() const { return total_consumed() + transient_peak_headroom(); }
  double profile_time() const { return (after_profile - before_profile).elapsed; }
  // vLLM's "Memory profiling takes ..." log line.
  std::string ToString() const;
};

}  // namespace vllm::worker
