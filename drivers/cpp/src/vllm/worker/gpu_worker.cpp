// See include/vllm/worker/gpu_worker.h.
#include "vllm/worker/gpu_worker.h"

#include <stdexcept>

namespace vllm::worker {

void check_free_memory_did_not_grow(const MemoryProfilingResult& profile) {
  const int64_t initial = profile.before_create.free_memory;
  const int64_t current = profile.after_profile.free_memory;
  if (initial < current) {
    throw std::invalid_argument(
        "Error in memory profiling. Initial free memory " + FormatGib(initial) + " GiB, current free memory " +
        FormatGib(current) +
        " GiB. This happens when other processes sharing the same container release GPU memory while vLLM is "
        "profiling during initialization. To fix this, ensure consistent GPU memory allocation or isolate vLLM in "
        "its own container.");
  }
}

KVCacheBudget determine_available_memory(const MemoryProfilingResult& profile, double gpu_memory_utilization) {
  const int64_t requested = request_memory(profile.before_create, gpu_memory_utilization);
  check_free_memory_did_not_grow(profile);
  return kv_cache_budget(requested, profile);
}

int num_blocks_with(const BudgetFn& budget_fn, const vllm::entrypoints::EngineParams& params,
                    const vllm::v1::KVCacheConfig& probe, const std::optional<MemoryProfilingResult>& profile) {
  std::optional<int64_t> available;
  if (profile.has_value()) {
    const double utilization = params.gpu_memory_utilization_value();
    request_memory(profile->before_create, utilization);
    if (params.num_blocks == 0 && params.kv_cache_memory_bytes == 0) {
      available = budget_fn(*profile, utilization).available_kv_cache_memory();
    }
  }
  return vllm::entrypoints::LoadedEngine::ResolveNumBlocks(params, probe, available);
}

int profiled_num_blocks(const vllm::entrypoints::EngineParams& params, const vllm::v1::KVCacheConfig& probe,
                        const std::optional<MemoryProfilingResult>& profile) {
  return num_blocks_with(determine_available_memory, params, probe, profile);
}

}  // namespace vllm::worker
