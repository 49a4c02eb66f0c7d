// ROAD-V1-MEM M2 operation vllm-pool (gate vllm-pool): vLLM 0.33.0's KV pool of a KV layout, as
// gates/rows/road_v1_mem/subjects_pool.py gives the Python port's.
#include "mem_common.h"
#include "mem_specs.h"
#include "vllm/v1/core/kv_pool_groups.h"
#include "vllm/v1/float_repr.h"

namespace gates::mem {
namespace {

GATES_MEM_OPERATION("vllm-pool", [](const Value& input) -> Value {
  Mapping(input, "a vllm-pool input");
  const vllm::v1::KVCacheConfig config = ImplKVConfig(Required(input, "layout"));
  const int64_t max_model_len = ReadInt("vllm_pool", "max_model_len", Required(input, "max_model_len"), 1);
  const int64_t batched = ReadInt("vllm_pool", "max_num_batched_tokens", Required(input, "max_num_batched_tokens"), 1);
  const Value* available = Member(input, "available_memory");
  const Value* override_blocks = Member(input, "num_blocks_override");
  const vllm::v1::VllmPool pool = vllm::v1::BuildVllmPool(
      config, max_model_len, batched,
      available ? ReadOptionalInt("vllm_pool", "available_memory", *available, 0) : std::nullopt,
      override_blocks ? ReadOptionalInt("vllm_pool", "num_blocks_override", *override_blocks, 0) : std::nullopt);
  Value groups = Value::array();
  for (const auto& group : pool.groups) {
    Value layers = Value::array();
    for (const auto& name : group.layer_names) layers.push_back(name);
    Value entry = Value::object();
    entry["layers"] = layers;
    entry["bytes_per_block"] = group.bytes_per_block();
    entry["blocks_per_request"] = group.blocks_per_request;
    groups.push_back(entry);
  }
  Value out = Value::object();
  out["groups"] = groups;
  out["bytes_per_block"] = pool.bytes_per_block;
  out["num_blocks"] = pool.num_blocks;
  out["blocks_per_request"] = pool.blocks_per_request();
  out["max_in_flight_tokens"] = pool.max_in_flight_tokens;
  out["kv_cache_tokens"] = pool.kv_cache_tokens();
  out["max_concurrency"] = vllm::v1::PyRound(pool.max_concurrency(), 4);
  return out;
});

}  // namespace
}  // namespace gates::mem
