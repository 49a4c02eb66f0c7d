// ROAD-V1-MEM M1 operations: resolve-num-blocks (num-blocks-precedence, kv-budget-divisor), blocks-and-warning
// (utilization-fallback-warning), engine-params (engine-params-validation), parse-size (size-parsing),
// params-from-argv (sizing-cli-flags). Inputs as gates/rows/road_v1_mem/build.py sizing_impl and subjects.py.
#include <optional>

#include "mem_common.h"
#include "mem_params.h"
#include "mem_specs.h"
#include "vllm/entrypoints/arg_parser.h"
#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/model_loader.h"
#include "vllm/entrypoints/sizes.h"

namespace gates::mem {
namespace {

using vllm::entrypoints::EngineParams;
using vllm::entrypoints::JsonInt;
using vllm::entrypoints::JsonIntKind;
using vllm::entrypoints::LoadedEngine;
using vllm::entrypoints::PoolSizing;

// {params, probe, profile}: the probe (default: the C++ port's test layer), then EngineParams, then the profile's
// available_kv_cache_memory, read only when the profile decides (as resolve_kv_pool reads it).
PoolSizing Sizing(const Value& input) {
  Mapping(input, "a sizing input");
  const Value* probe_data = Member(input, "probe");
  const vllm::v1::KVCacheConfig probe = ImplKVConfig(probe_data ? *probe_data : DefaultProbe());
  const Value* params_data = Member(input, "params");
  const EngineParams params = EngineParamsFrom(params_data ? *params_data : Value::object());
  std::optional<int64_t> available;
  const Value* profile = Member(input, "profile");
  if (profile != nullptr && !profile->is_null() && params.num_blocks == 0 && params.kv_cache_memory_bytes == 0) {
    const Value* avail = Member(*profile, "available_kv_cache_memory");
    int64_t value = 0;
    std::string digits;
    const JsonIntKind kind =
        avail == nullptr || avail->is_boolean() ? JsonIntKind::kNot : JsonInt(*avail, &value, &digits);
    if (kind == JsonIntKind::kNot) {
      Refuse("profile.available_kv_cache_memory must be an int of bytes, got " +
             (avail ? PyJsonRepr(*avail) : std::string("None")));
    }
    if (kind == JsonIntKind::kBig) {
      Refuse("profile.available_kv_cache_memory=" + digits + " does not fit in an int64_t");
    }
    available = value;
  }
  return LoadedEngine::ResolveKVPool(params, probe, available);
}

GATES_MEM_OPERATION("resolve-num-blocks", [](const Value& input) -> Value { return Sizing(input).num_blocks; });

GATES_MEM_OPERATION("blocks-and-warning", [](const Value& input) -> Value {
  const PoolSizing sizing = Sizing(input);
  Value out = Value::object();
  out["num_blocks"] = sizing.num_blocks;
  out["warned"] = sizing.warning.has_value();
  return out;
});

GATES_MEM_OPERATION("engine-params", [](const Value& input) -> Value {
  return EngineParamsView(EngineParamsFrom(input));
});

GATES_MEM_OPERATION("parse-size", [](const Value& input) -> Value {
  Mapping(input, "a parse-size input");
  const Value& text = Required(input, "text");
  const Value& what = Required(input, "what");
  const std::string what_text = what.is_string() ? what.get<std::string>() : PyJsonRepr(what);
  if (!text.is_string()) {
    Refuse(what_text + ": a size must be given as text, got " + PyJsonRepr(text) + " (" + PyJsonTypeName(text) + ")");
  }
  return DecimalValue(vllm::entrypoints::ParseSize(text.get<std::string>(), what_text).digits);
});

GATES_MEM_OPERATION("params-from-argv", [](const Value& input) -> Value {
  Mapping(input, "a params-from-argv input");
  const Value& argv_value = Required(input, "argv");
  std::vector<std::string> argv;
  if (!argv_value.is_array()) Refuse("argv must be a list of strings");
  for (const Value& arg : argv_value) {
    if (!arg.is_string()) Refuse("argv must be a list of strings, got " + PyJsonRepr(argv_value));
    argv.push_back(arg.get<std::string>());
  }
  vllm::entrypoints::ArgParser parser("gate");
  vllm::entrypoints::AddSizingArguments(parser);
  vllm::entrypoints::Namespace args;
  try {
    args = parser.parse(argv);
  } catch (const vllm::entrypoints::HelpRequested&) {
    Refuse("");  // argparse printed the help to stdout and exited 0: nothing on stderr
  }
  return ParamsView(vllm::entrypoints::EngineParamsFromArgs(args));
});

}  // namespace
}  // namespace gates::mem
