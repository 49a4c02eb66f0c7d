// CAPI-ABI operations on the struct itself: model-params-layout (gate layout), model-params-default-members
// (defaults) and model-params-default-by-value (default-by-value); and the status enum: vllm-status-codes
// (status-codes). Inputs and outputs as
// gates/rows/capi_abi/operations.yaml; the Python bindings are impl/capi/layout.py and subjects.py.
#include "capi_common.h"
#include "vllm/capi/abi.h"
#include "vllm/capi/library.h"
#include "vllm/capi/load.h"

extern "C" vllm_model_params vllm_model_params_default(void);  // the port's (src/vllm/capi/vllm_c.cpp)

namespace gates::capi {
namespace {

GATES_CAPI_OPERATION("model-params-layout", [](const Value& input) -> Value {
  NoArguments(input);
  Value fields = Value::array();
  for (const vllm::capi::MemberInfo& m : vllm::capi::Members())
    fields.push_back(Value::array({m.name, m.ctype, static_cast<int64_t>(m.offset), static_cast<int64_t>(m.size),
                                   m.since}));
  Value out = Value::object();
  out["sizeof"] = static_cast<int64_t>(sizeof(vllm_model_params));
  out["fields"] = fields;
  return out;
});

// Every vllm_status the binding knows, in declaration order, with the code the header gives it.
GATES_CAPI_OPERATION("vllm-status-codes", [](const Value& input) -> Value {
  NoArguments(input);
  Value out = Value::array();
  for (vllm_status status : {VLLM_OK, VLLM_ERR_INVALID_ARGUMENT, VLLM_ERR_MODEL_LOAD, VLLM_ERR_RUNTIME, VLLM_ERR_UNKNOWN})
    out.push_back(Value::array({std::string(vllm::capi::StatusName(status)), static_cast<int64_t>(status)}));
  return out;
});

GATES_CAPI_OPERATION("model-params-default-members", [](const Value& input) -> Value {
  NoArguments(input);
  return MemberValues(vllm_model_params_default());
});

// The configured library's default, returned by value into the port's struct after the version handshake; without
// a library setting, the port's own vllm_model_params_default() called through a function pointer.
GATES_CAPI_OPERATION("model-params-default-by-value", [](const Value& input) -> Value {
  NoArguments(input);
  if (auto path = ConfiguredLibraryPath()) {
    const auto library = vllm::capi::CapiLibrary::Open(*path, vllm::capi::kAbiVersion,
                                                       ReadText(ConfiguredHeaderPath()));
    return MemberValues(library.ModelParamsDefault());
  }
  vllm_model_params (*make_default)(void) = &vllm_model_params_default;
  return MemberValues(make_default());
});

}  // namespace
}  // namespace gates::capi
