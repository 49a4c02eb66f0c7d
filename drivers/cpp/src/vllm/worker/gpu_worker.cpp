// See include/vllm/worker/gpu_worker.h.
#include "vllm/worker/gpu_worker.h"

namespace vllm::worker {

KVCacheBudget determine_available_memory(const MemoryProfilingResult& profile, double gpu_memory_utilization) {
  return kv_cache_budget(request_memory(profile.before_create, gpu_memory_utilization), profile);
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
