// See include/vllm/v1/core/kv_cache_utils.h.
#include "vllm/v1/core/kv_cache_utils.h"

#include <stdexcept>

#include "vllm/v1/checked_math.h"
#include "vllm/v1/field_checks.h"
#include "vllm/worker/memory_snapshot.h"

namespace vllm::v1 {

const std::string& NoAvailableMemoryMessage() {
  static const std::string message =
      std::string("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                  "initializing the engine (this flag also controls CPU memory reservation on the CPU backend, "
                  "despite its name). See ") +
      kConservingMemoryDocs + " for more details.";
  return message;
}

namespace {
void CheckInputs(int64_t max_model_len, std::optional<int64_t> max_num_batched_tokens) {
  CheckInt("kv_cache_utils", "max_model_len", max_model_len, 1);
  CheckOptionalInt("kv_cache_utils", "max_num_batched_tokens", max_num_batched_tokens, 1);
}
}  // namespace

int64_t max_memory_usage_bytes(const KVCacheSpecMap& kv_cache_spec, int64_t max_model_len,
                               std::optional<int64_t> max_num_batched_tokens) {
  int64_t total = 0;
  for (const auto& [name, spec] : kv_cache_spec) {
    total = CheckedAdd(total, spec->max_memory_usage_bytes(max_model_len, max_num_batched_tokens),
                       "a request's KV bytes");
  }
  return total;
}

int64_t estimate_max_model_len(const KVCacheSpecMap& kv_cache_spec, int64_t available_memory, int64_t max_model_len,
                               std::optional<int64_t> max_num_batched_tokens) {
  CheckInputs(max_model_len, max_num_batched_tokens);
  auto fits = [&](int64_t length) {
    return max_memory_usage_bytes(kv_cache_spec, length, max_num_batched_tokens) <= available_memory;
  };
  if (!fits(1)) return 0;
  int64_t low = 1, high = max_model_len;  // invariant: fits(low); every length above high fails or is out of range
  while (low < high) {
    const int64_t middle = low + (high - low + 1) / 2;
    if (fits(middle)) {
      low = middle;
    } else {
      high = middle - 1;
    }
  }
  return low;
}

int64_t null_block_bytes(const KVCacheSpecMap& kv_cache_spec) {
  int64_t total = 0;
  for (const auto& [name, spec] : kv_cache_spec) {
    if (spec != kv_cache_spec.front().second) {
      throw std::logic_error("null_block_bytes: layers of different specs (vLLM's KV cache groups) are not ported");
    }
    total = CheckedAdd(total, spec->page_size_bytes(), "the null block's bytes");
  }
  return total;
}

void check_enough_kv_cache_memory(const KVCacheSpecMap& kv_cache_spec, int64_t available_memory,
                                  int64_t max_model_len, std::optional<int64_t> max_num_batched_tokens) {
  CheckInputs(max_model_len, max_num_batched_tokens);
  if (kv_cache_spec.empty()) return;  // an attention-free model keeps no KV cache
  // vLLM 0.33.0 holds back the pool block BlockPool keeps as its null block; a budget at or below it is empty.
  const int64_t null_block = null_block_bytes(kv_cache_spec);
  if (available_memory <= null_block) throw std::invalid_argument(NoAvailableMemoryMessage());
  const int64_t usable = available_memory - null_block;
  const int64_t needed = max_memory_usage_bytes(kv_cache_spec, max_model_len, max_num_batched_tokens);
  if (needed <= usable) return;
  const int64_t estimated = estimate_max_model_len(kv_cache_spec, usable, max_model_len, max_num_batched_tokens);
  const std::string estimate_sentence =
      estimated > 0 ? "Based on the available memory, the estimated maximum model length is " +
                          std::to_string(estimated) + ". "
                    : std::string();
  throw std::invalid_argument(
      "To serve at least one request with the model's max seq len (" + std::to_string(max_model_len) + "), (" +
      vllm::worker::FormatGib(needed) +
      " GiB KV cache is needed, which is larger than the available KV cache memory (" +
      vllm::worker::FormatGib(usable) + " GiB). " + estimate_sentence +
      "Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing "
      "`max_model_len` when initializing the engine. See " +
      kConservingMemoryDocs + " for more details.");
}

}  // namespace vllm::v1
