// vLLM 0.33.0's KV pool of a KV layout: the layers' KV cache groups sharing one pool of blocks sized by the largest
// group, and what one max_model_len request takes of it (MEM-2.12, kv-plan's vLLM section).
//
// Ported from impl/v1/core/kv_pool_groups.py, which says where each rule sits in vLLM 0.33.0
// (vllm/v1/core/kv_cache_planning.py, vllm/v1/core/kv_cache_utils.py, vllm/v1/kv_cache_interface.py).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vllm/v1/kv_cache_interface.h"

namespace vllm::v1 {

// VllmConfig.max_concurrent_batches with async scheduling (vLLM's default) at pipeline-parallel size 1.
inline constexpr int64_t kMaxConcurrentBatches = 2;

// One of vLLM's KV cache groups: its layers, their (equal) spec, and the pool blocks a request takes in it.
struct PoolGroup {
  std::shared_ptr<KVCacheSpec> spec;
  std::vector<std::string> layer_names;
  int64_t blocks_per_request = 0;

  // The group's share of one pool block: its layers' pages side by side.
  int64_t bytes_per_block() const;
};

// vLLM's pool for a budget.
struct VllmPool {
  std::vector<PoolGroup> groups;
  int64_t bytes_per_block = 0;
  int64_t num_blocks = 0;
  int64_t max_model_len = 0;
  int64_t max_in_flight_tokens = 0;

  int64_t blocks_per_request() const;  // the sum over groups
  double max_concurrency() const;      // num_blocks / blocks_per_request
  int64_t kv_cache_tokens() const;     // int(max_concurrency * max_model_len)
};

// Why the model cannot give vLLM's pool for config, or nullopt when it can.
std::optional<std::string> UnmodelledReason(const KVCacheConfig& config);

// vLLM's pool: num_blocks_override blocks, else available_memory / bytes per block. Throws std::invalid_argument
// for a layout UnmodelledReason names, or with neither budget.
VllmPool BuildVllmPool(const KVCacheConfig& config, int64_t max_model_len, int64_t max_num_batched_tokens,
                       std::optional<int64_t> available_memory, std::optional<int64_t> num_blocks_override);

}  // namespace vllm::v1
