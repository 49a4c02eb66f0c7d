// CAPI-ABI engine-params-via-c (gate cli-flags): the example CLI's path (impl/entrypoints/example_cli.py; the C++
// port's examples/cli): --model and the kv-plan sizing flags parsed by the shared flag code, written into
// vllm_model_params as a C caller does (the default struct, an absent utilization as 0.0), read back; and
// example-cli-run (gate cli-output): the same as a command, its exit status, stdout and stderr.
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

std::vector<std::string> ArgvOf(const Value& input) {
  const Value* argv_value = Find(input, "argv");
  if (argv_value == nullptr || !argv_value->is_array()) throw std::invalid_argument("argv must be a list of strings");
  std::vector<std::string> argv;
  for (const Value& word : *argv_value) {
    if (!word.is_string()) throw std::invalid_argument("argv must be a list of strings");
    argv.push_back(word.get<std::string>());
  }
  return argv;
}

// The struct the flags fill, as a C caller fills it; a refused command line throws Raised("usage", "example-cli:
// REASON") or the std::invalid_argument EngineParams throws.
vllm::capi::OwnedModelParams FilledParams(const std::vector<std::string>& argv) {
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
  return params;
}

GATES_CAPI_OPERATION("engine-params-via-c", [](const Value& input) -> Value {
  vllm::capi::OwnedModelParams params = FilledParams(ArgvOf(input));
  return Describe(vllm::capi::EngineParamsFromC(params.params));
});

// CAPI-10.3: the example CLI as a command: exit 0 and the JSON report on stdout, or exit 2 and one stderr line.
GATES_CAPI_OPERATION("example-cli-run", [](const Value& input) -> Value {
  std::vector<std::string> argv = ArgvOf(input);
  Value out = Value::object();
  try {
    vllm::capi::OwnedModelParams params = FilledParams(argv);
    Value engine = Describe(vllm::capi::EngineParamsFromC(params.params));
    Value report = Value::object();
    report["vllm_model_params"] = MemberValues(params.params);
    bool explicit_utilization = engine["gpu_memory_utilization_is_explicit"].get<bool>();
    engine.erase("gpu_memory_utilization_is_explicit");
    report["engine_params"] = engine;
    report["gpu_memory_utilization_is_explicit"] = explicit_utilization;
    out["exit"] = 0;
    out["stdout"] = report.dump(2, ' ', /*ensure_ascii=*/true) + "\n";
    out["stderr"] = "";
  } catch (const Raised& err) {
    if (err.kind != "usage") throw;
    std::string message = err.what();
    const std::string name = "example-cli: ";
    if (message.rfind(name, 0) == 0) message = message.substr(name.size());
    out = {{"exit", 2}, {"stdout", ""}, {"stderr", "example-cli: error: " + message + "\n"}};
  } catch (const std::logic_error& err) {  // invalid_argument, out_of_range: the Python port's ValueError
    out = {{"exit", 2}, {"stdout", ""}, {"stderr", std::string("example-cli: error: ") + err.what() + "\n"}};
  } catch (const std::overflow_error& err) {
    out = {{"exit", 2}, {"stdout", ""}, {"stderr", std::string("example-cli: error: ") + err.what() + "\n"}};
  }
  return out;
});

}  // namespace
}  // namespace gates::capi
