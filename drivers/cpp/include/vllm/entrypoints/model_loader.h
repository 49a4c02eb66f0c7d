// Engine load parameters and the KV-pool block-count precedence (ROAD-V1-MEM M1, MEM-1.1 to MEM-1.8, MEM-3.1).
//
// Ported from impl/entrypoints/model_loader.py; names follow the C++ port, jefby/vllm.cpp
// include/vllm/entrypoints/model_loader.h (vllm::entrypoints::EngineParams, LoadedEngine::ResolveNumBlocks in
// src/vllm/entrypoints/model_loader.cpp). The precedence is num_blocks > kv_cache_memory_bytes > the memory
// profile > the 256-block fallback, as vLLM's num_gpu_blocks_override / kv_cache_memory_bytes /
// gpu_memory_utilization (vllm/config/cache.py, vllm/v1/core/kv_cache_utils.py).
//
// Whether the utilization was chosen is carried as in the C++ port: gpu_memory_utilization is std::optional,
// std::nullopt meaning the default 0.92 nobody set (the Python port's DefaultUtilization marker).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "vllm/v1/kv_cache_interface.h"

namespace vllm::entrypoints {

inline constexpr int kFallbackNumBlocks = 256;
inline constexpr double kDefaultGpuMemoryUtilization = 0.92;  // vLLM's default (vllm/config/cache.py)
inline constexpr int64_t kInt32Max = 2147483647;
inline constexpr int64_t kInt64Max = 9223372036854775807;

// The C ABI member an integer field crosses as (vllm_model_params at ABI v16): its C type and range.
struct CIntMember {
  const char* name;
  const char* ctype;
  int64_t minimum;
  int64_t maximum;
};
// block_size, num_blocks, max_model_len, max_num_batched_tokens, kv_cache_memory_bytes, max_num_seqs: the order
// EngineParams checks them in.
const std::vector<CIntMember>& CIntMembers();
const CIntMember& CIntMemberOf(const std::string& name);

// "EngineParams.<name>=<value> has no <ctype> spelling in vllm_model_params (accepted: <min>..<max>)": the refusal
// of an integer its C member cannot hold (issue 14: no silent wrap at the ABI). `value` is the decimal text.
std::string NoCSpellingMessage(const std::string& name, const std::string& value);

// Thrown for NoCSpellingMessage (the Python port's impl.capi.errors.InvalidArgument).
struct InvalidArgument : std::invalid_argument {
  InvalidArgument(const std::string& message, std::string field_)
      : std::invalid_argument(message), field(std::move(field_)) {}
  std::string field;
};

// Load-time parameters, one field per field of the C struct vllm_model_params at ABI v16.
// Sizing knobs: num_blocks (> 0 overrides, 0 = auto), kv_cache_memory_bytes (0 = unset), gpu_memory_utilization
// (fraction of total device memory in (0, 1]; std::nullopt = the default, not chosen).
struct EngineParams {
  std::optional<std::string> model_path;
  std::optional<std::string> tokenizer_config_path;
  int64_t block_size = 32;
  int64_t num_blocks = 0;
  int64_t max_model_len = 0;
  int64_t max_num_seqs = 32;
  std::optional<std::string> tool_parser;
  std::optional<std::string> reasoning_parser;
  std::optional<std::string> speculative_config;
  int64_t enable_prefix_caching = 0;  // tri-state 0 / 1 / 2
  int64_t max_num_batched_tokens = 0;
  std::optional<std::string> scheduling_policy;
  std::optional<std::string> kv_transfer_config;
  int64_t enable_jump_forward = 0;  // tri-state 0 / 1 / 2
  int64_t device = 0;               // 0 auto, 1, 2
  std::optional<double> gpu_memory_utilization;
  int64_t kv_cache_memory_bytes = 0;

  // The ranges of every field, in the Python port's order (std::invalid_argument; InvalidArgument above a C
  // member's maximum).
  void Validate() const;
  double gpu_memory_utilization_value() const {
    return gpu_memory_utilization.value_or(kDefaultGpuMemoryUtilization);
  }
  // True when the caller chose the utilization, even if the value equals the default 0.92.
  bool gpu_memory_utilization_is_explicit() const { return gpu_memory_utilization.has_value(); }
};

// A byte budget or profile cannot size a pool for a model whose blocks hold no KV bytes (MEM-1.7).
struct NoKVBytesPerBlockError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The knob that decided a pool size.
enum class Knob { kNumBlocks, kKvCacheMemoryBytes, kGpuMemoryUtilization, kFallback };
// "num_blocks", "kv_cache_memory_bytes", "gpu_memory_utilization", "fallback".
const char* KnobName(Knob knob);

// A resolved KV pool: the block count, the knob that decided it, the bytes per block used, and the
// UtilizationNotAppliedWarning text when an explicit utilization did not size the pool.
struct PoolSizing {
  int num_blocks = 0;
  Knob decided_by = Knob::kFallback;
  std::optional<int64_t> bytes_per_block;
  std::optional<std::string> warning;
};

class LoadedEngine {
 public:
  // num_blocks > kv_cache_memory_bytes > profile (available_kv_cache_memory, the bytes a memory profile left for
  // the pool) > the 256-block fallback. The override is returned as given, without a fit check (as vLLM's
  // num_gpu_blocks_override); a byte budget is floor-divided by the bytes per block and ignores the utilization.
  // A count the int32_t vllm_model_params.num_blocks cannot carry (above 2147483647) is refused. Throws
  // std::invalid_argument (NoKVBytesPerBlockError for a model whose blocks hold no KV bytes).
  static PoolSizing ResolveKVPool(const EngineParams& params, const vllm::v1::KVCacheConfig& probe,
                                  std::optional<int64_t> available_kv_cache_memory = std::nullopt);

  // The block count of ResolveKVPool.
  static int ResolveNumBlocks(const EngineParams& params, const vllm::v1::KVCacheConfig& probe,
                              std::optional<int64_t> available_kv_cache_memory = std::nullopt);
};

}  // namespace vllm::entrypoints
