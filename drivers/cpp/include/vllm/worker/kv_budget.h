// The memory an instance may use and what of it is left for the KV cache (MEM-3.3, MEM-3.4).
//
// Ported from impl/worker/kv_budget.py, which mirrors request_memory of vllm/v1/worker/utils.py and the budget
// step of determine_available_memory in vllm/v1/worker/gpu_worker.py (without CUDA-graph estimation).
#pragma once

#include <cstdint>
#include <string>

#include "vllm/worker/memory_profiler.h"
#include "vllm/worker/memory_snapshot.h"

namespace vllm::worker {

// ceil(total * utilization) of the start-up snapshot (the IEEE double product, as upstream); refused with vLLM's
// message when the free memory is below it.
int64_t request_memory(const MemorySnapshot& init_snapshot, double gpu_memory_utilization);

// The requested memory less everything that is not KV cache. Validate() refuses nothing left, with vLLM's
// "No available memory for the cache blocks" message.
struct KVCacheBudget {
  int64_t requested_memory = 0;
  int64_t non_kv_cache_memory = 0;

  void Validate() const;
  int64_t available_kv_cache_memory() const { return requested_memory - non_kv_cache_memory; }
  std::string ToString() const;
};

// The KV budget a finished profile leaves of the requested memory (validated).
KVCacheBudget kv_cache_budget(int64_t requested_memory, const MemoryProfilingResult& profile);

}  // namespace vllm::worker
