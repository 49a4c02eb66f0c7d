// ROAD-V1-MEM M2 operations on model configs: model-bytes-per-block (model-geometry), model-kv-layers
// (model-kv-layers), kv-plan-summary (kv-plan-fixtures) and kv-plan-cli (kv-plan-output). Inputs as
// gates/rows/road_v1_mem/build.py model_impl and subjects.py kv_plan_summary / kv_plan_cli; the fixtures are
// gates/rows/road_v1_mem/fixtures/models/<stem>.json under the project root (the working directory).
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "mem_common.h"
#include "vllm/entrypoints/kv_plan.h"
#include "vllm/entrypoints/model_geometry.h"
#include "vllm/v1/float_repr.h"
#include "vllm/v1/kv_cache_interface.h"

namespace gates::mem {
namespace {

const char* kModelFixtures = "gates/rows/road_v1_mem/fixtures/models/";

// The probe of a model input {model: fixture stem | config: {...}, tensor_parallel_size, block_size,
// kv_cache_dtype}, defaults 1, 16 and auto.
vllm::v1::KVCacheConfig ModelProbe(const Value& input) {
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
  return vllm::entrypoints::ProbeKVCacheConfig(cfg, request);
}

GATES_MEM_OPERATION("model-bytes-per-block", [](const Value& input) -> Value {
  return vllm::v1::KVBytesPerBlock(ModelProbe(input));
});

// Each KV layer's name -> its spec's class name (MEM-2.11).
GATES_MEM_OPERATION("model-kv-layers", [](const Value& input) -> Value {
  Value layers = Value::object();
  for (const auto& group : ModelProbe(input).kv_cache_groups) {
    for (const std::string& name : group.layer_names) layers[name] = group.kv_cache_spec->type_name();
  }
  return layers;
});

// A config.json given inline, written to a private temporary folder for kv-plan to read, removed when done.
class InlineConfigFile {
 public:
  explicit InlineConfigFile(const Value& config) {
    char folder[] = "/tmp/gates-kv-plan-XXXXXX";
    if (mkdtemp(folder) == nullptr) throw std::runtime_error("cannot make a temporary folder for the inline config");
    folder_ = folder;
    path_ = folder_ + "/config.json";
    std::ofstream out(path_);
    out << Mapping(config, "config").dump();
    if (!out) throw std::runtime_error("cannot write the inline config to " + path_);
  }
  ~InlineConfigFile() {
    unlink(path_.c_str());
    rmdir(folder_.c_str());
  }
  InlineConfigFile(const InlineConfigFile&) = delete;
  InlineConfigFile& operator=(const InlineConfigFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string folder_;
  std::string path_;
};

// kv-plan's argv for an input {model: fixture stem, argv: flags}: --model-config <the fixture>, then the flags;
// `config_path`, when given, stands for the fixture (an inline config's file).
std::vector<std::string> KvPlanArgv(const Value& input, const std::string* config_path = nullptr) {
  Mapping(input, "a kv-plan input");
  const Value& argv_value = Required(input, "argv");
  std::string path;
  if (config_path != nullptr) {
    path = *config_path;
  } else {
    const Value& model = Required(input, "model");
    if (!model.is_string()) Refuse("model must be a fixture stem, got " + PyJsonRepr(model));
    path = kModelFixtures + model.get<std::string>() + ".json";
  }
  std::vector<std::string> argv = {"--model-config", path};
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
  Mapping(input, "a kv-plan input");
  const Value* model = Member(input, "model");
  const Value* config = Member(input, "config");
  if ((model == nullptr) == (config == nullptr)) {
    Refuse("kv-plan-summary needs one of model and config, got model=" + (model ? PyJsonRepr(*model) : "None") +
           ", config=" + (config ? PyJsonRepr(*config) : "None"));
  }
  std::optional<InlineConfigFile> inline_config;
  if (config != nullptr) inline_config.emplace(*config);
  const std::vector<std::string> argv = KvPlanArgv(input, inline_config ? &inline_config->path() : nullptr);
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
