// See include/vllm/worker/kv_budget.h.
#include "vllm/worker/kv_budget.h"

#include <cmath>
#include <stdexcept>

#include "vllm/v1/core/kv_cache_utils.h"
#include "vllm/v1/field_checks.h"
#include "vllm/v1/float_repr.h"

namespace vllm::worker {

int64_t request_memory(const MemorySnapshot& init_snapshot, double gpu_memory_utilization) {
  const double utilization =
      vllm::v1::CheckFraction("request_memory", "gpu_memory_utilization", gpu_memory_utilization);
  const double product = static_cast<double>(init_snapshot.total_memory) * utilization;
  const auto requested = static_cast<int64_t>(std::ceil(product));
  if (init_snapshot.free_memory < requested) {
    throw std::invalid_argument(
        "Free memory on device " + init_snapshot.device + " (" + FormatGib(init_snapshot.free_memory) + "/" +
        FormatGib(init_snapshot.total_memory) +
        " GiB) on startup is less than desired GPU memory utilization (" + vllm::v1::PyFloatRepr(utilization) +
        ", " + FormatGib(requested) +
        " GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.");
  }
  return requested;
}

void KVCacheBudget::Validate() const {
  vllm::v1::CheckInt("KVCacheBudget", "requested_memory", requested_memory, 0);
  if (available_kv_cache_memory() <= 0) throw std::invalid_argument(vllm::v1::NoAvailableMemoryMessage());
}

std::string KVCacheBudget::ToString() const {
  return "Available KV cache memory: " + FormatGib(available_kv_cache_memory()) + " GiB";
}

KVCacheBudget kv_cache_budget(int64_t requested_memory, const MemoryProfilingResult& profile) {
  KVCacheBudget budget{requested_memory, profile.non_kv_cache_memory()};
  budget.Validate();
  return budget;
}

}  // namespace vllm::worker
