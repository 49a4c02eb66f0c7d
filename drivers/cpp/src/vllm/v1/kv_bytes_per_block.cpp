// KVBytesPerBlock (include/vllm/v1/kv_cache_interface.h): the group-aware divisor of a KV byte budget.
// Mirrors impl/v1/kv_cache_interface.py kv_bytes_per_block and jefby/vllm.cpp src/vllm/v1/kv_cache_interface.cpp.
#include "vllm/v1/checked_math.h"
#include "vllm/v1/kv_cache_interface.h"

namespace vllm::v1 {

int64_t KVBytesPerBlock(const KVCacheConfig& config) {
  int64_t total = 0;
  if (!config.per_layer_attn_specs.empty()) {
    for (const auto& spec : config.per_layer_attn_specs) {
      if (spec != nullptr) total = CheckedAdd(total, spec->page_size_bytes(), "KV bytes per block");
    }
    return total;
  }
  for (const KVCacheGroupSpec& group : config.kv_cache_groups) {
    const auto* attention = dynamic_cast<const AttentionSpec*>(group.kv_cache_spec.get());
    if (attention == nullptr) continue;  // Mamba/GDN state is per sequence slot, not per block
    const int64_t layers = static_cast<int64_t>(group.layer_names.size());
    total = CheckedAdd(total, CheckedMul(attention->page_size_bytes(), layers, "KV bytes per block"),
                       "KV bytes per block");
  }
  return total;
}

}  // namespace vllm::v1
