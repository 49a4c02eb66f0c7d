// See include/vllm/entrypoints/json_repr.h.
#include "vllm/entrypoints/json_repr.h"

#include "vllm/v1/float_repr.h"
#include "vllm/v1/str_repr.h"

namespace vllm::entrypoints {

namespace {
bool IsBigInt(const Json& value) {
  return value.is_object() && value.size() == 1 && value.contains("$int") && value["$int"].is_string();
}
}  // namespace

JsonIntKind JsonInt(const Json& value, int64_t* out, std::string* digits) {
  if (value.is_number_integer() && !value.is_number_unsigned()) {
    *out = value.get<int64_t>();
    return JsonIntKind::kFits;
  }
  if (value.is_number_unsigned()) {
    const auto u = value.get<uint64_t>();
    if (u <= static_cast<uint64_t>(INT64_MAX)) {
      *out = static_cast<int64_t>(u);
      return JsonIntKind::kFits;
    }
    if (digits) *digits = std::to_string(u);
    return JsonIntKind::kBig;
  }
  if (IsBigInt(value)) {
    if (digits) *digits = value["$int"].get<std::string>();
    return JsonIntKind::kBig;
  }
  return JsonIntKind::kNot;
}

std::string PyJsonTypeName(const Json& value) {
  if (value.is_null()) return "NoneType";
  if (value.is_boolean()) return "bool";
  if (value.is_number_integer() || IsBigInt(value)) return "int";
  if (value.is_number_float()) return "float";
  if (value.is_string()) return "str";
  if (value.is_array()) return "list";
  return "dict";
}

std::string PyJsonRepr(const Json& value) {
  if (value.is_null()) return "None";
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_number_unsigned()) return std::to_string(value.get<uint64_t>());
  if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  if (value.is_number_float()) return vllm::v1::PyFloatRepr(value.get<double>());
  if (value.is_string()) return vllm::v1::PyStrRepr(value.get<std::string>());
  if (IsBigInt(value)) return value["$int"].get<std::string>();
  if (value.is_array()) {
    std::string out = "[";
    bool first = true;
    for (const Json& item : value) {
      out += (first ? "" : ", ") + PyJsonRepr(item);
      first = false;
    }
    return out + "]";
  }
  std::string out = "{";
  bool first = true;
  for (auto it = value.begin(); it != value.end(); ++it) {
    out += (first ? "" : ", ") + vllm::v1::PyStrRepr(it.key()) + ": " + PyJsonRepr(it.value());
    first = false;
  }
  return out + "}";
}

const Json* JsonGet(const Json& object, const std::string& name) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace vllm::entrypoints
