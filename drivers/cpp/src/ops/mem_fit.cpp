// ROAD-V1-MEM M3 operations of the fit check: check-enough-kv-cache-memory (kv-fit-check) and
// estimate-max-model-len. Input as gates/rows/road_v1_mem/build_fit.py fit_call: num_layers, block_size,
// num_kv_heads, head_size, dtype, available_memory, max_model_len, optionally max_num_batched_tokens; one
// FullAttentionSpec per layer.
#include <optional>
#include <set>

#include "mem_common.h"
#include "vllm/entrypoints/json_repr.h"
#include "vllm/v1/core/kv_cache_utils.h"

namespace gates::mem {
namespace {

using vllm::entrypoints::JsonInt;
using vllm::entrypoints::JsonIntKind;

struct FitCall {
  vllm::v1::KVCacheSpecMap specs;
  int64_t available_memory = 0;
  int64_t max_model_len = 0;
  std::optional<int64_t> max_num_batched_tokens;
};

FitCall BuildFitCall(const Value& data) {
  static const std::vector<std::string> fields = {"available_memory", "block_size", "dtype", "head_size",
                                                  "max_model_len", "num_kv_heads", "num_layers"};
  static const std::string optional_field = "max_num_batched_tokens";
  const bool has_optional = data.is_object() && data.contains(optional_field);
  bool exact = data.is_object() && data.size() == fields.size() + (has_optional ? 1 : 0);
  for (const std::string& f : fields) exact = exact && data.contains(f);
  if (!exact) {
    std::vector<std::string> got;
    if (data.is_object()) {
      for (auto it = data.begin(); it != data.end(); ++it) got.push_back(it.key());
    }
    Refuse("fit case input must have exactly " + PySortedNames(fields) + " and optionally " +
           PySortedNames({optional_field}) + ", got " + PySortedNames(got));
  }
  const Value& dtype = data["dtype"];
  if (!dtype.is_string() || vllm::v1::FindDType(dtype.get<std::string>()) == nullptr) {
    Refuse("module 'torch' has no attribute " + PyJsonRepr(dtype) + " (AttributeError)");
  }
  const std::string owner = "FullAttentionSpec";
  std::shared_ptr<const vllm::v1::KVCacheSpec> spec = vllm::v1::MakeSpec<vllm::v1::FullAttentionSpec>(
      ReadInt(owner, "block_size", data["block_size"], 1), ReadInt(owner, "num_kv_heads", data["num_kv_heads"], 1),
      ReadInt(owner, "head_size", data["head_size"], 1), *vllm::v1::FindDType(dtype.get<std::string>()));
  const Value& layers = data["num_layers"];
  int64_t count = 0;
  if (layers.is_boolean()) {
    count = layers.get<bool>() ? 1 : 0;
  } else if (JsonInt(layers, &count) != JsonIntKind::kFits) {
    Refuse("'" + PyJsonTypeName(layers) + "' object cannot be interpreted as an integer (num_layers)");
  }
  FitCall call;
  for (int64_t i = 0; i < count; ++i) call.specs.emplace_back("model.layers." + std::to_string(i) + ".self_attn", spec);
  const Value& available = data["available_memory"];
  std::string digits;
  if (available.is_boolean() || JsonInt(available, &call.available_memory, &digits) == JsonIntKind::kNot) {
    Refuse("available_memory must be an int number of bytes, got " + PyJsonRepr(available));
  }
  if (!digits.empty()) Refuse("available_memory=" + digits + " does not fit in an int64_t");
  call.max_model_len = ReadInt("kv_cache_utils", "max_model_len", data["max_model_len"], 1);
  if (has_optional) {
    call.max_num_batched_tokens = ReadOptionalInt("kv_cache_utils", optional_field, data[optional_field], 1);
  }
  return call;
}

GATES_MEM_OPERATION("check-enough-kv-cache-memory", [](const Value& input) -> Value {
  const FitCall call = BuildFitCall(input);
  vllm::v1::check_enough_kv_cache_memory(call.specs, call.available_memory, call.max_model_len,
                                          call.max_num_batched_tokens);
  return Value();
});

GATES_MEM_OPERATION("estimate-max-model-len", [](const Value& input) -> Value {
  const FitCall call = BuildFitCall(input);
  return vllm::v1::estimate_max_model_len(call.specs, call.available_memory, call.max_model_len,
                                          call.max_num_batched_tokens);
});

}  // namespace
}  // namespace gates::mem
