// ROAD-V1-MEM M3 operations over recorded snapshots: available-kv-cache-memory (profile-kv-budget) and
// util-path-num-blocks (profile-util-blocks). Inputs as gates/rows/road_v1_mem/build_profile.py budget_call and
// blocks_call; the targets are gates/rows/road_v1_mem/subjects_profile.py.
#include "mem_common.h"
#include "mem_params.h"
#include "mem_profile_input.h"
#include "vllm/worker/gpu_worker.h"

namespace gates::mem {
namespace {

GATES_MEM_OPERATION("available-kv-cache-memory", [](const Value& input) -> Value {
  const Value fields = ResolveProfileInput(input);
  const vllm::worker::MemoryProfilingResult profile = ProfilingResult(fields);
  const double utilization = ReadFraction("request_memory", "gpu_memory_utilization", fields["gpu_memory_utilization"]);
  return vllm::worker::determine_available_memory(profile, utilization).available_kv_cache_memory();
});

bool Truthy(const Value& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

GATES_MEM_OPERATION("util-path-num-blocks", [](const Value& input) -> Value {
  const Value fields = ResolveProfileInput(input);
  const Value kv_bytes = fields.contains("kv_cache_memory_bytes") ? fields["kv_cache_memory_bytes"] : Value(0);
  const bool profiled = !fields.contains("profiled") || Truthy(fields["profiled"]);
  Value param_fields = Value::object();
  param_fields["kv_cache_memory_bytes"] = kv_bytes;
  std::optional<vllm::worker::MemoryProfilingResult> profile;
  if (profiled) {
    param_fields["gpu_memory_utilization"] = fields["gpu_memory_utilization"];
  }
  const vllm::entrypoints::EngineParams params = EngineParamsFrom(param_fields);
  if (profiled) profile = ProfilingResult(fields);
  const vllm::v1::KVCacheConfig probe = KVProbe(Required(fields, "kv"));
  return vllm::worker::profiled_num_blocks(params, probe, profile);
});

}  // namespace
}  // namespace gates::mem
