// ROAD-V1-MEM M2 operations on model configs: model-bytes-per-block (model-geometry), kv-plan-summary
// (kv-plan-fixtures) and kv-plan-cli (kv-plan-output). Inputs as gates/rows/road_v1_mem/build.py model_impl and
// subjects.py kv_plan_summary / kv_plan_cli; the fixtures are gates/rows/road_v1_mem/fixtures/models/<stem>.json
// under the project root (the working directory).
#include <cmath>
#include <sstream>

#include "mem_common.h"
#include "vllm/entrypoints/kv_plan.h"
#include "vllm/entrypoints/model_geometry.h"
#include "vllm/v1/float_repr.h"
#include "vllm/v1/kv_cache_interface.h"

namespace gates::mem {
namespace {

const char* kModelFixtures = "gates/rows/road_v1_mem/fixtures/models/";

GATES_MEM_OPERATION("model-bytes-per-block", [](const Value& input) -> Value {
  Mapping(input, "a model input");
  static const Value one = 1, sixteen = 16, automatic = "auto";
  const Value* tp = Member(input, "tensor_parallel_size");
  const Value* block_size = Member(input, "block_size");
  const Value* cache_dtype = Member(input, "kv_cache_dtype");
  vllm::entrypoints::ProbeRequest request;
  request.tensor_parallel_size = ReadInt("ProbeRequest", "tensor_parallel_size", tp ? *tp : one, 1);
  request.block_size = ReadInt("ProbeRequest", "block_size", block_size ? *block_size : sixteen, 1);
  const Value& dtype_value = cache_dtype ? *cache_dtype : automatic;
  request.kv_cache_dtype = dtype_value.is_string() ? dtype_value.get<std::string>() : PyJsonRepr(dtype_value);
  request.Validate();
  vllm::entrypoints::Json cfg;
  if (const Value* model = Member(input, "model")) {
    if (!model->is_string()) Refuse("model must be a fixture stem, got " + PyJsonRepr(*model));
    cfg = vllm::entrypoints::LoadModelConfig(kModelFixtures + model->get<std::string>() + ".json");
  } else {
    cfg = Mapping(Required(input, "config"), "config");
  }
  return vllm::v1::KVBytesPerBlock(vllm::entrypoints::ProbeKVCacheConfig(cfg, request));
});

// kv-plan's argv for an input {model: fixture stem, argv: flags}: --model-config <the fixture>, then the flags.
std::vector<std::string> KvPlanArgv(const Value& input) {
  Mapping(input, "a kv-plan input");
  const Value& model = Required(input, "model");
  const Value& argv_value = Required(input, "argv");
  if (!model.is_string()) Refuse("model must be a fixture stem, got " + PyJsonRepr(model));
  std::vector<std::string> argv = {"--model-config", kModelFixtures + model.get<std::string>() + ".json"};
  if (!argv_value.is_array()) Refuse("argv must be a list of strings");
  for (const Value& arg : argv_value) {
    if (!arg.is_string()) Refuse("argv must be a list of strings, got " + PyJsonRepr(argv_value));
    argv.push_back(arg.get<std::string>());
  }
  return argv;
}

GATES_MEM_OPERATION("kv-plan-cli", [](const Value& input) -> Value {
  std::ostringstream out, err;
  const int status = vllm::entrypoints::RunKvPlan(KvPlanArgv(input), out, err);
  Value result = Value::object();
  result["exit"] = status;
  result["stdout"] = out.str();
  result["stderr"] = err.str();
  return result;
});

GATES_MEM_OPERATION("kv-plan-summary", [](const Value& input) -> Value {
  const std::vector<std::string> argv = KvPlanArgv(input);
  const vllm::entrypoints::KvPlan plan = vllm::entrypoints::Plan(vllm::entrypoints::BuildKvPlanParser().parse(argv));
  Value out = Value::object();
  out["bytes_per_block"] = plan.bytes_per_block;
  out["num_blocks"] = plan.num_blocks;
  out["decided_by"] = plan.decided_by;
  out["kv_cache_tokens"] = plan.kv_cache_tokens;
  Value groups = Value::array();
  for (const auto& group : plan.groups) groups.push_back(group.bytes_per_block);
  out["group_bytes_per_block"] = groups;
  Value states = Value::array();
  for (const auto& group : plan.groups) states.push_back(group.state_bytes_per_sequence);
  out["group_state_bytes"] = states;
  out["max_concurrency"] = plan.max_concurrency ? Value(vllm::v1::PyRound(*plan.max_concurrency, 4)) : Value();
  out["warned"] = !plan.warnings.empty();
  Value pool = Value::object();
  const auto& section = plan.vllm;
  pool["computed"] = section.computed;
  pool["decided_by"] = section.computed ? Value(section.decided_by) : Value();
  pool["bytes_per_block"] = section.computed ? Value(section.bytes_per_block) : Value();
  pool["num_blocks"] = section.computed ? Value(section.num_blocks) : Value();
  pool["kv_cache_tokens"] = section.computed ? Value(section.kv_cache_tokens) : Value();
  pool["max_concurrency"] = section.computed ? Value(vllm::v1::PyRound(section.max_concurrency, 4)) : Value();
  pool["agrees_with_port"] = section.computed ? Value(section.agrees_with_port) : Value();
  out["vllm"] = pool;
  return out;
});

}  // namespace
}  // namespace gates::mem
