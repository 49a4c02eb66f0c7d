// See include/vllm/worker/memory_profiler.h.
#include "vllm/worker/memory_profiler.h"

#include <cstdio>
#include <stdexcept>

#include "vllm/v1/field_checks.h"
#include "vllm/v1/float_repr.h"

namespace vllm::worker {

void MemoryProfilingResult::Validate() const {
  before_create.Validate();
  before_profile.Validate();
  after_profile.Validate();
  vllm::v1::CheckInt("MemoryProfilingResult", "weights_memory", weights_memory, 0);
  // Subtracting checks that all three come from one device; the order must be chronological.
  if ((before_profile - before_create).elapsed < 0 || profile_time() < 0) {
    throw std::invalid_argument(
        "MemoryProfilingResult snapshots must be in time order before_create <= before_profile <= after_profile, "
        "got timestamps " +
        vllm::v1::PyFloatRepr(before_create.timestamp) + ", " + vllm::v1::PyFloatRepr(before_profile.timestamp) +
        ", " + vllm::v1::PyFloatRepr(after_profile.timestamp));
  }
}

std::string MemoryProfilingResult::ToString() const {
  char time_buf[64];
  std::snprintf(time_buf, sizeof(time_buf), "%.2f", profile_time());
  return std::string("Memory profiling takes ") + time_buf + " seconds. Total non KV cache memory: " +
         FormatGib(non_kv_cache_memory()) + "GiB; torch peak memory increase: " + FormatGib(torch_peak_increase()) +
         "GiB; total consumed (from mem_get_info): " + FormatGib(total_consumed()) +
         "GiB; weights memory: " + FormatGib(weights_memory) + "GiB.";
}

}  // namespace vllm::worker
