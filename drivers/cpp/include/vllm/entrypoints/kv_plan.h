// kv-plan: how a model's KV pool would be sized, counted like vLLM's start-up log (MEM-1.11, MEM-2.12).
//
// Ported from impl/entrypoints/kv_plan.py (the "GPU KV cache size" / "Maximum concurrency" lines of
// vllm/v1/core/kv_cache_utils.py, and vLLM's refusal of a --max-model-len above the model's).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
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

// One of vLLM's KV cache groups in kv-plan's vLLM section.
struct KvPlanVllmGroup {
  int64_t group = 0;
  std::string spec;  // the spec's class name
  int64_t layers = 0;
  int64_t page_size_bytes = 0;
  int64_t bytes_per_block = 0;              // the group's share of one pool block
  int64_t blocks_per_request = 0;
  std::optional<int64_t> sliding_window;    // set for SlidingWindowSpec groups only
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
  std::vector<KvPlanVllmGroup> groups;
  std::optional<int64_t> available_memory_bytes;  // the budget it divides, unset under --num-blocks
  int64_t blocks_per_request = 0;   // the sum over groups
  int64_t max_in_flight_tokens = 0;
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

// The plan as kv-plan's log-style text lines (no final newline), as impl/entrypoints/kv_plan.py render words them.
std::string RenderKvPlan(const KvPlan& plan);

// The plan as kv-plan --json prints it: the Python port's keys in its order, indented by 2 (no final newline).
std::string KvPlanJson(const KvPlan& plan);

// kv-plan as a command (argv after the program name): the plan, as text or JSON, and a newline on out, each warning
// as "WARNING: <message>" on err; 0, or 2 and the line "kv-plan: error: <message>" on err for a refused flag or
// config. Flags the parser itself refuses throw, as ArgParser::parse does.
int RunKvPlan(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err);

}  // namespace vllm::entrypoints
