// ROAD-V1-MEM kv-quant-modes and kv-quant-mode-of (gates/rows/road_v1_mem/operations.yaml): the port's KVQuantMode
// (vllm/v1/kv_cache_interface.h) as plain data, as gates/rows/road_v1_mem/subjects_quant.py gives the Python port's.
#include <string>

#include "mem_common.h"
#include "vllm/v1/kv_cache_interface.h"

namespace gates::mem {
namespace {

using vllm::v1::KVQuantMode;

GATES_MEM_OPERATION("kv-quant-modes", [](const Value& input) -> Value {
  if (!input.is_object() || !input.empty()) Refuse("kv-quant-modes takes no input, got " + PyJsonRepr(input));
  Value modes = Value::object();
  for (const auto& [name, mode] : vllm::v1::KVQuantModeMembers()) modes[name] = static_cast<int>(mode);
  return modes;
});

GATES_MEM_OPERATION("kv-quant-mode-of", [](const Value& input) -> Value {
  const Value& cache_dtype = Required(Mapping(input, "kv-quant-mode-of input"), "cache_dtype");
  if (!cache_dtype.is_string()) {
    Refuse("cache_dtype must be a str, got " + PyJsonRepr(cache_dtype) + " (" + PyJsonTypeName(cache_dtype) + ")");
  }
  const KVQuantMode mode = vllm::v1::kv_quant_mode_for(cache_dtype.get<std::string>());
  Value out = Value::object();
  out["name"] = vllm::v1::KVQuantModeName(mode);
  out["value"] = static_cast<int>(mode);
  return out;
});

}  // namespace
}  // namespace gates::mem
