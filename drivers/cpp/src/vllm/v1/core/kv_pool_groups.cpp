// See include/vllm/v1/core/kv_pool_groups.h. Steps and messages as impl/v1/core/kv_pool_groups.py.
#include "vllm/v1/core/kv_pool_groups.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "vllm/v1/checked_math.h"

namespace vllm::v1 {
namespace {

// The layers' pool blocks one request at max_model_len takes in a group of spec.
int64_t BlocksPerRequest(const KVCacheSpec& spec, int64_t max_model_len, int64_t max_in_flight_tokens) {
  if (const auto* window = dynamic_cast<const SlidingWindowSpec*>(&spec)) {
    const int64_t tokens = std::min(window->sliding_window - 1 + max_in_flight_tokens, max_model_len);
    return CeilDiv(tokens, spec.block_size) + 1;
  }
  return CeilDiv(max_model_len, spec.block_size);  // full attention, MLA included
}

// vLLM's kv_cache_groups: one per layout group when there is one; else each cut to one group size.
std::vector<std::pair<std::shared_ptr<KVCacheSpec>, std::vector<std::string>>> KvCacheGroups(
    const KVCacheConfig& config) {
  std::vector<std::pair<std::shared_ptr<KVCacheSpec>, std::vector<std::string>>> buckets;
  for (const auto& group : config.kv_cache_groups) buckets.emplace_back(group.kv_cache_spec, group.layer_names);
  if (buckets.size() == 1) return buckets;
  int64_t least = static_cast<int64_t>(buckets.front().second.size()), most = least;
  for (const auto& bucket : buckets) {
    least = std::min(least, static_cast<int64_t>(bucket.second.size()));
    most = std::max(most, static_cast<int64_t>(bucket.second.size()));
  }
  const int64_t group_size = static_cast<double>(most) < static_cast<double>(least) * 1.5 ? most : least;
  std::vector<std::pair<std::shared_ptr<KVCacheSpec>, std::vector<std::string>>> groups;
  for (const auto& [spec, names] : buckets) {
    const int64_t count = CeilDiv(static_cast<int64_t>(names.size()), group_size);
    for (int64_t i = 0; i < count; ++i) {
      std::vector<std::string> taken;
      for (size_t j = static_cast<size_t>(i); j < names.size(); j += static_cast<size_t>(count)) taken.push_back(names[j]);
      groups.emplace_back(spec, taken);
    }
  }
  return groups;
}

}  // namespace

int64_t PoolGroup::bytes_per_block() const {
  return CheckedMul(spec->page_size_bytes(), static_cast<int64_t>(layer_names.size()), "KV bytes");
}

int64_t VllmPool::blocks_per_request() const {
  int64_t total = 0;
  for (const auto& group : groups) total += group.blocks_per_request;
  return total;
}

double VllmPool::max_concurrency() const {
  return static_cast<double>(num_blocks) / static_cast<double>(blocks_per_request());
}

int64_t VllmPool::kv_cache_tokens() const {
  return static_cast<int64_t>(max_concurrency() * static_cast<double>(max_model_len));
}

std::optional<std::string> UnmodelledReason(const KVCacheConfig& config) {
  if (!config.per_layer_attn_specs.empty()) return "per-layer heterogeneous specs are not modelled";
  if (config.kv_cache_groups.empty()) return "the model has no KV cache layers";
  std::set<std::string> other;
  std::set<int64_t> pages;
  for (const auto& group : config.kv_cache_groups) {
    if (dynamic_cast<const MambaSpec*>(group.kv_cache_spec.get()) != nullptr) {
      return "vLLM 0.33.0 first raises the attention block size until one attention page holds a Mamba state and "
             "pads the Mamba page to it (Platform._align_hybrid_block_size, vllm/platforms/interface.py), which "
             "depends on the attention backend's kernel block sizes; not modelled";
    }
  }
  for (const auto& group : config.kv_cache_groups) {
    const KVCacheSpec* spec = group.kv_cache_spec.get();
    if (dynamic_cast<const FullAttentionSpec*>(spec) == nullptr && dynamic_cast<const SlidingWindowSpec*>(spec) == nullptr) {
      other.insert(spec->type_name());
    }
    pages.insert(spec->page_size_bytes());
  }
  if (!other.empty()) {
    std::string names;
    for (const auto& name : other) names += (names.empty() ? "" : ", ") + name;
    return names + " layers are not modelled";
  }
  if (pages.size() > 1) {
    return "the layers' pages differ (vLLM 0.33.0 unifies them with unify_kv_cache_spec_page_size or packs them "
           "block-outermost); not modelled";
  }
  return std::nullopt;
}

VllmPool BuildVllmPool(const KVCacheConfig& config, int64_t max_model_len, int64_t max_num_batched_tokens,
                       std::optional<int64_t> available_memory, std::optional<int64_t> num_blocks_override) {
  if (const auto reason = UnmodelledReason(config)) throw std::invalid_argument(*reason);
  VllmPool pool;
  pool.max_model_len = max_model_len;
  pool.max_in_flight_tokens = CheckedMul(kMaxConcurrentBatches, max_num_batched_tokens, "tokens in flight");
  for (auto& [spec, names] : KvCacheGroups(config)) {
    const int64_t blocks = BlocksPerRequest(*spec, max_model_len, pool.max_in_flight_tokens);
    pool.groups.push_back(PoolGroup{spec, names, blocks});
    pool.bytes_per_block = std::max(pool.bytes_per_block, pool.groups.back().bytes_per_block());
  }
  if (num_blocks_override) {
    pool.num_blocks = *num_blocks_override;
  } else if (available_memory) {
    pool.num_blocks = *available_memory / pool.bytes_per_block;
  } else {
    throw std::invalid_argument("vllm_pool needs available_memory or num_blocks_override");
  }
  return pool;
}

}  // namespace vllm::v1
