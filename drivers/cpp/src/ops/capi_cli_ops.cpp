// CAPI-ABI engine-params-via-c (gate cli-flags): the example CLI's path (impl/entrypoints/example_cli.py; the C++
// port's examples/cli): --model and the kv-plan sizing flags parsed by the shared flag code, written into
// vllm_model_params as a C caller does (the default struct, an absent utilization as 0.0), read back.
#include "capi_common.h"
#include "vllm/capi/convert.h"
#include "vllm/entrypoints/arg_parser.h"
#include "vllm/entrypoints/cli_args.h"

extern "C" vllm_model_params vllm_model_params_default(void);

namespace gates::capi {
namespace {

using vllm::entrypoints::ArgValue;

vllm::entrypoints::ArgParser ExampleParser() {
  vllm::entrypoints::ArgParser parser("example-cli");
  vllm::entrypoints::Argument model;
  model.flag = "--model";
  model.dest = "model_path";
  model.metavar = "PATH";
  parser.add(model);
  vllm::entrypoints::AddSizingArguments(parser);
  return parser;
}

GATES_CAPI_OPERATION("engine-params-via-c", [](const Value& input) -> Value {
  const Value* argv_value = Find(input, "argv");
  if (argv_value == nullptr || !argv_value->is_array()) throw std::invalid_argument("argv must be a list of strings");
  std::vector<std::string> argv;
  for (const Value& word : *argv_value) {
    if (!word.is_string()) throw std::invalid_argument("argv must be a list of strings");
    argv.push_back(word.get<std::string>());
  }
  vllm::entrypoints::Namespace args;
  try {
    args = ExampleParser().parse(argv);
  } catch (const vllm::entrypoints::ArgParseError& err) {
    throw Raised("usage", "example-cli: " + err.reason);
  } catch (const vllm::entrypoints::HelpRequested&) {
    throw Raised("usage", "example-cli: help requested");
  }
  vllm::entrypoints::EngineParamsFromArgs(args);  // a value the Python path refuses is refused before the struct
  vllm::capi::OwnedModelParams params;
  params.params = vllm_model_params_default();
  using vllm::capi::MemberOf;
  std::optional<std::string> model_path;
  if (const ArgValue* v = args.find("model_path"); v && std::holds_alternative<std::string>(*v))
    model_path = std::get<std::string>(*v);
  vllm::entrypoints::EngineParams only_model;
  only_model.model_path = model_path;
  {  // member_to_c("model_path", ...): the string checks of the inverse
    vllm::capi::OwnedModelParams checked = vllm::capi::ModelParamsFromEngine(only_model);
    (void)checked;
  }
  params.SetString(MemberOf("model_path"), model_path);
  for (const char* name : {"block_size", "num_blocks", "max_model_len", "kv_cache_memory_bytes"}) {
    const ArgValue* v = args.find(name);
    if (v && std::holds_alternative<int64_t>(*v)) params.SetInt(MemberOf(name), std::get<int64_t>(*v));
  }
  const ArgValue* chosen = args.find("gpu_memory_utilization");
  params.SetDouble(MemberOf("gpu_memory_utilization"),
                   chosen && std::holds_alternative<double>(*chosen) ? std::get<double>(*chosen) : 0.0);
  return Describe(vllm::capi::EngineParamsFromC(params.params));
});

}  // namespace
}  // namespace gates::capi
