// See include/vllm/entrypoints/kv_plan.h: kv-plan's text and JSON output and the command around them (MEM-1.11,
// MEM-2.12). Lines, labels and key order as impl/entrypoints/kv_plan.py (render, _run), so both ports print alike.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "vllm/entrypoints/json_repr.h"
#include "vllm/entrypoints/kv_plan.h"
#include "vllm/v1/checked_math.h"

namespace vllm::entrypoints {
namespace {

const std::string kPortLabel = "C++ port: summed over layers";
const std::string kVllmLabel = "vLLM 0.33.0: pool shared by KV cache groups";
constexpr int kExitUsage = 2;

// Python's format(n, ','): digits grouped by three with commas.
std::string Grouped(int64_t n) {
  const std::string digits = std::to_string(n < 0 ? -static_cast<uint64_t>(n) : static_cast<uint64_t>(n));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

// Python's format(x, '.2f').
std::string Fixed2(double x) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.2f", x);
  return buffer;
}

std::string PortDecidedBy(const KvPlan& plan) {
  std::string decided;
  if (plan.decided_by == "num_blocks") {
    decided = "--num-blocks (override)";
  } else if (plan.decided_by == "kv_cache_memory_bytes") {
    decided = "--kv-cache-memory (budget // bytes per block): " + Grouped(plan.kv_cache_memory_bytes) + " // " +
              Grouped(plan.bytes_per_block);
  } else if (plan.decided_by == "gpu_memory_utilization") {
    decided = "--gpu-memory-utilization (memory profile)";
  } else {
    decided = "fallback: no memory profile yet (ROAD-V1-MEM M3), 256 blocks";
  }
  return "decided by " + decided;
}

std::string VllmDecidedBy(const KvPlanVllm& pool) {
  std::string decided;
  if (pool.decided_by == "num_blocks") {
    decided = "--num-blocks (num_gpu_blocks_override)";
  } else if (pool.decided_by == "kv_cache_memory_bytes") {
    decided = "--kv-cache-memory (kv_cache_memory_bytes // bytes per block)";
  } else {
    decided = "the C++ port's pool memory // bytes per block (no memory profile here)";
  }
  if (pool.available_memory_bytes) {
    decided += ": " + Grouped(*pool.available_memory_bytes) + " // " + Grouped(pool.bytes_per_block);
  }
  return "decided by " + decided;
}

// Bytes per block, block count, memory, token capacity and concurrency of one model, indented.
void AddPoolLines(std::vector<std::string>& lines, int64_t bytes_per_block, int64_t num_blocks, int64_t tokens,
                  std::optional<double> max_concurrency, int64_t max_model_len, const std::string& decided,
                  const std::string& block_note = "", const std::string& concurrency_note = "") {
  const int64_t memory = vllm::v1::CheckedMul(num_blocks, bytes_per_block, "KV bytes");
  lines.push_back("  KV bytes per block: " + Grouped(bytes_per_block) + " (" +
                  Fixed2(static_cast<double>(bytes_per_block) / 1048576.0) + " MiB)" + block_note);
  lines.push_back("  num_blocks: " + Grouped(num_blocks) + " (" + decided + ")");
  lines.push_back("  KV cache memory: " + Fixed2(static_cast<double>(memory) / 1073741824.0) + " GiB");
  lines.push_back("  GPU KV cache size: " + Grouped(tokens) + " tokens");
  if (max_concurrency) {
    lines.push_back("  Maximum concurrency for " + Grouped(max_model_len) + " tokens per request: " +
                    Fixed2(*max_concurrency) + "x" + concurrency_note);
  }
}

// vLLM's model: one line when it is not computed or agrees with the port's, else its groups and figures.
void AddVllmLines(std::vector<std::string>& lines, const KvPlan& plan) {
  const KvPlanVllm& pool = plan.vllm;
  if (!pool.computed) {
    lines.push_back(kVllmLabel + ": not computed: " + pool.reason);
    return;
  }
  if (pool.agrees_with_port) {
    lines.push_back(kVllmLabel + ": agrees with the C++ port (one KV cache group: the same bytes per block, "
                    "num_blocks, token capacity and maximum concurrency)");
    return;
  }
  lines.push_back(kVllmLabel);
  for (const KvPlanVllmGroup& group : pool.groups) {
    std::string need = Grouped(group.blocks_per_request) + " blocks per request";
    if (group.sliding_window) {
      need += " (window " + Grouped(*group.sliding_window) + ": cdiv(min(" + Grouped(*group.sliding_window - 1) +
              " + " + Grouped(pool.max_in_flight_tokens) + " tokens in flight, " + Grouped(plan.max_model_len) +
              "), " + std::to_string(plan.block_size) + ") + 1)";
    }
    lines.push_back("  KV cache group " + std::to_string(group.group) + ": " + group.spec + " x " +
                    std::to_string(group.layers) + " layers, " + Grouped(group.page_size_bytes) +
                    " bytes per layer per block = " + Grouped(group.bytes_per_block) + " bytes; " + need);
  }
  const std::string whose = pool.groups.size() > 1 ? ", the largest group's" : ", its one group's";
  const std::string note =
      " (" + Grouped(pool.num_blocks) + " blocks / " + Grouped(pool.blocks_per_request) + " blocks per request)";
  AddPoolLines(lines, pool.bytes_per_block, pool.num_blocks, pool.kv_cache_tokens, pool.max_concurrency,
               plan.max_model_len, VllmDecidedBy(pool), whose, note);
}

template <typename T>
Json OrNull(bool present, const T& value) {
  return present ? Json(value) : Json(nullptr);
}

Json VllmJson(const KvPlanVllm& pool) {
  const bool on = pool.computed;
  Json groups = Json::array();
  for (const KvPlanVllmGroup& group : pool.groups) {
    groups.push_back({{"group", group.group}, {"spec", group.spec}, {"layers", group.layers},
                      {"page_size_bytes", group.page_size_bytes}, {"bytes_per_block", group.bytes_per_block},
                      {"blocks_per_request", group.blocks_per_request},
                      {"sliding_window", OrNull(group.sliding_window.has_value(), group.sliding_window.value_or(0))}});
  }
  Json out = Json::object();
  out["label"] = kVllmLabel;
  out["vllm_version"] = "0.33.0";
  out["computed"] = on;
  out["reason"] = OrNull(!on, pool.reason);
  out["agrees_with_port"] = OrNull(on, pool.agrees_with_port);
  out["groups"] = groups;
  out["bytes_per_block"] = OrNull(on, pool.bytes_per_block);
  out["num_blocks"] = OrNull(on, pool.num_blocks);
  out["decided_by"] = OrNull(on, pool.decided_by);
  out["available_memory_bytes"] =
      OrNull(pool.available_memory_bytes.has_value(), pool.available_memory_bytes.value_or(0));
  out["kv_cache_tokens"] = OrNull(on, pool.kv_cache_tokens);
  out["blocks_per_request"] = OrNull(on, pool.blocks_per_request);
  out["max_in_flight_tokens"] = OrNull(on, pool.max_in_flight_tokens);
  out["max_concurrency"] = OrNull(on, pool.max_concurrency);
  return out;
}

}  // namespace

std::string RenderKvPlan(const KvPlan& plan) {
  std::vector<std::string> lines = {"Model: " + plan.architecture + " (" + plan.model_config +
                                    "), tensor_parallel_size=" + std::to_string(plan.tensor_parallel_size) +
                                    ", dtype=" + plan.dtype + ", kv_cache_dtype=" + plan.kv_cache_dtype +
                                    ", block_size=" + std::to_string(plan.block_size)};
  for (const KvPlanGroup& group : plan.groups) {
    const std::string head = "  KV cache group " + std::to_string(group.group) + ": " + group.spec + " x " +
                             std::to_string(group.layers) + " layers, ";
    if (group.bytes_per_block) {
      lines.push_back(head + Grouped(group.page_size_bytes) + " bytes per layer per block = " +
                      Grouped(group.bytes_per_block) + " bytes per block");
    } else {
      lines.push_back(head + Grouped(group.state_bytes_per_sequence) +
                      " bytes of state per sequence (not per block)");
    }
  }
  lines.push_back(kPortLabel + " (what ROAD-V1-MEM gates)");
  AddPoolLines(lines, plan.bytes_per_block, plan.num_blocks, plan.kv_cache_tokens, plan.max_concurrency,
               plan.max_model_len, PortDecidedBy(plan));
  AddVllmLines(lines, plan);
  std::string text;
  for (size_t i = 0; i < lines.size(); ++i) text += (i ? "\n" : "") + lines[i];
  return text;
}

std::string KvPlanJson(const KvPlan& plan) {
  Json groups = Json::array();
  for (const KvPlanGroup& group : plan.groups) {
    groups.push_back({{"group", group.group}, {"spec", group.spec}, {"layers", group.layers},
                      {"page_size_bytes", group.page_size_bytes}, {"bytes_per_block", group.bytes_per_block},
                      {"state_bytes_per_sequence", group.state_bytes_per_sequence}});
  }
  Json out = Json::object();
  out["model_config"] = plan.model_config;
  out["architecture"] = plan.architecture;
  out["tensor_parallel_size"] = plan.tensor_parallel_size;
  out["dtype"] = plan.dtype;
  out["kv_cache_dtype"] = plan.kv_cache_dtype;
  out["block_size"] = plan.block_size;
  out["groups"] = groups;
  out["bytes_per_block"] = plan.bytes_per_block;
  out["num_blocks"] = plan.num_blocks;
  out["decided_by"] = plan.decided_by;
  out["kv_cache_memory_bytes"] = plan.kv_cache_memory_bytes;
  out["kv_cache_tokens"] = plan.kv_cache_tokens;
  out["max_model_len"] = plan.max_model_len;
  out["max_concurrency"] = OrNull(plan.max_concurrency.has_value(), plan.max_concurrency.value_or(0.0));
  out["warnings"] = plan.warnings;
  out["vllm_pool"] = VllmJson(plan.vllm);
  return out.dump(2, ' ', true);
}

int RunKvPlan(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  const Namespace args = BuildKvPlanParser().parse(argv);
  KvPlan plan;
  try {
    plan = Plan(args);
  } catch (const std::invalid_argument& refusal) {
    err << "kv-plan: error: " << refusal.what() << "\n";
    return kExitUsage;
  }
  for (const std::string& message : plan.warnings) err << "WARNING: " << message << "\n";
  const ArgValue* json = args.find("json");
  const bool as_json = json != nullptr && std::holds_alternative<bool>(*json) && std::get<bool>(*json);
  out << (as_json ? KvPlanJson(plan) : RenderKvPlan(plan)) << "\n";
  return 0;
}

}  // namespace vllm::entrypoints
