// kv-plan: how a model's KV pool would be sized, counted like vLLM's start-up log (MEM-1.11, MEM-2.12).
//
// Ported from impl/entrypoints/kv_plan.py (the "GPU KV cache size" / "Maximum concurrency" lines of
// vllm/v1/core/kv_cache_utils.py, and vLLM's refusal of a --max-model-len above the model's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vllm/entrypoints/arg_parser.h"

namespace vllm::entrypoints {

struct KvPlanGroup {
  int64_t group = 0;
  std::string spec;  // the spec's class name
  int64_t layers = 0;
  int64_t page_size_bytes = 0;
  int64_t bytes_per_block = 0;            // page * layers for attention groups, else 0
  int64_t state_bytes_per_sequence = 0;   // page * layers for recurrent groups, else 0
};

// vLLM 0.33.0's model of the same pool (vllm::v1::BuildVllmPool), as kv-plan shows it beside the port's figures.
struct KvPlanVllm {
  bool computed = false;            // false when vllm::v1::UnmodelledReason names the layout; the rest is unset
  std::string reason;               // why not computed
  std::string decided_by;           // "num_blocks", "kv_cache_memory_bytes" or "port_pool_memory"
  int64_t bytes_per_block = 0;
  int64_t num_blocks = 0;
  int64_t kv_cache_tokens = 0;
  double max_concurrency = 0.0;
  bool agrees_with_port = false;    // bytes per block, blocks, tokens and concurrency all equal the port's
};

struct KvPlan {
  std::string model_config;
  std::string architecture;
  int64_t tensor_parallel_size = 1;
  std::string dtype;
  std::string kv_cache_dtype;
  int64_t block_size = 0;
  std::vector<KvPlanGroup> groups;
  int64_t bytes_per_block = 0;
  int64_t num_blocks = 0;
  std::string decided_by;  // "num_blocks", "kv_cache_memory_bytes", "gpu_memory_utilization", "fallback"
  int64_t kv_cache_memory_bytes = 0;
  int64_t kv_cache_tokens = 0;
  int64_t max_model_len = 0;
  std::optional<double> max_concurrency;  // num_blocks / blocks one max_model_len request needs
  std::vector<std::string> warnings;
  KvPlanVllm vllm;
};

// kv-plan's flags: --model-config, --tensor-parallel-size, --dtype, --kv-cache-dtype, --max-num-batched-tokens,
// --json and the shared sizing flags.
ArgParser BuildKvPlanParser();

// Resolve the pool for parsed flags; throws std::invalid_argument (FlagError, ConfigError) on a bad config or knob.
KvPlan Plan(const Namespace& args);

}  // namespace vllm::entrypoints
