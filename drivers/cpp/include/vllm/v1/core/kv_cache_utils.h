// The KV-cache fit check and the maximum-model-length estimate, with vLLM's messages (MEM-3.4, MEM-3.6, MEM-3.7).
//
// Ported from impl/v1/core/kv_cache_utils.py, which mirrors _check_enough_kv_cache_memory,
// check_enough_kv_cache_memory, max_memory_usage_bytes and estimate_max_model_len of
// vllm/v1/core/kv_cache_planning.py (0.33.0): the per-layer sum over a layer-name -> spec mapping; the check holds
// back the null block first, the estimate does not. (The C++ port's
// jefby/vllm.cpp include/vllm/v1/core/kv_cache_utils.h has same-named functions over (available, bytes per block,
// block size); these take the per-layer specs, as upstream Python does.)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vllm/v1/kv_cache_interface.h"

namespace vllm::v1 {

inline constexpr const char* kConservingMemoryDocs = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/";

// vLLM's refusal of an empty KV budget.
const std::string& NoAvailableMemoryMessage();

// Layer name -> KV spec, in layer order (upstream: dict[str, KVCacheSpec]).
using KVCacheSpecMap = std::vector<std::pair<std::string, std::shared_ptr<const KVCacheSpec>>>;

// Bytes all layers need together to hold one request of max_model_len tokens.
int64_t max_memory_usage_bytes(const KVCacheSpecMap& kv_cache_spec, int64_t max_model_len,
                               std::optional<int64_t> max_num_batched_tokens = std::nullopt);

// The longest length in [1, max_model_len] whose KV need fits available_memory; 0 when not even 1 fits.
// A binary search, as vLLM's.
int64_t estimate_max_model_len(const KVCacheSpecMap& kv_cache_spec, int64_t available_memory, int64_t max_model_len,
                               std::optional<int64_t> max_num_batched_tokens = std::nullopt);

// Bytes of the pool block vLLM 0.33.0's BlockPool keeps as the null block: every layer's page side by side (one KV
// cache group). Layers of different specs (several groups) are not ported: std::logic_error.
int64_t null_block_bytes(const KVCacheSpecMap& kv_cache_spec);

// Throws std::invalid_argument with vLLM 0.33.0's messages when available_memory less the null block cannot hold
// one request of max_model_len tokens (or is empty); an attention-free model (no specs) always passes.
void check_enough_kv_cache_memory(const KVCacheSpecMap& kv_cache_spec, int64_t available_memory,
                                  int64_t max_model_len,
                                  std::optional<int64_t> max_num_batched_tokens = std::nullopt);

}  // namespace vllm::v1
