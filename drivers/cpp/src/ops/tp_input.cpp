#include "ops/tp_input.h"

#include <climits>
#include <stdexcept>
#include <string>

#include "driver/pyrepr.h"

namespace gates::tp {
namespace {

namespace vd = vllm::distributed;

// A Python int as long long; false for {"$int": text} and uint64 values past LLONG_MAX (sign in `negative`).
bool small_int(const Value& v, long long& out, bool& negative) {
  if (v.is_number_unsigned()) {
    negative = false;
    if (v.get<unsigned long long>() > static_cast<unsigned long long>(LLONG_MAX)) return false;
    out = static_cast<long long>(v.get<unsigned long long>());
    return true;
  }
  if (v.is_number_integer()) {
    out = v.get<long long>();
    negative = out < 0;
    return true;
  }
  negative = v["$int"].get<std::string>().rfind('-', 0) == 0;
  return false;
}

int dim_value(const char* name, const Value& v) {
  if (!is_py_int(v))
    throw std::invalid_argument(std::string("ParallelDims.") + name + " must be an int >= 1, got " + py_repr(v) + " (" +
                                py_type_name(v) + ")");
  long long value = 0;
  bool negative = false;
  if (!small_int(v, value, negative)) {
    if (negative) throw std::invalid_argument(std::string("ParallelDims.") + name + " must be an int >= 1, got " + py_repr(v));
    value = LLONG_MAX;
  }
  vd::CheckParallelDim(name, value);
  if (value > INT_MAX)
    throw std::invalid_argument(std::string("ParallelDims.") + name + "=" + py_repr(v) + " is over " + std::to_string(INT_MAX) +
                                ", more than this port counts");
  return static_cast<int>(value);
}

}  // namespace

vd::ParallelDims parse_dims(const Value& dims) {
  if (dims.is_object() && dims.size() == 1 && dims.contains("$map"))
    throw std::invalid_argument("ParallelDims() keywords must be strings");
  if (!dims.is_object() || (dims.size() == 1 && (dims.contains("$int") || dims.contains("$wrong"))))
    throw std::invalid_argument("ParallelDims() argument after ** must be a mapping, not " + py_type_name(dims));
  for (auto it = dims.begin(); it != dims.end(); ++it) {
    bool known = false;
    for (const char* field : vd::kParallelDimsFields) known = known || it.key() == field;
    if (!known) throw std::invalid_argument("ParallelDims.__init__() got an unexpected keyword argument '" + it.key() + "'");
  }
  vd::ParallelDims out;
  int* slots[] = {&out.tp, &out.pcp, &out.pp, &out.dp, &out.external_dp, &out.dcp};
  for (std::size_t i = 0; i < vd::kParallelDimsFields.size(); ++i) {
    const char* name = vd::kParallelDimsFields[i];
    if (dims.contains(name)) *slots[i] = dim_value(name, dims[name]);
  }
  out.Validate();
  return out;
}

int parse_rank(const vd::ParallelDims& dims, const Value& rank) {
  const int world = dims.world_size();
  if (!is_py_int(rank))
    throw std::invalid_argument("rank must be an int in [0, " + std::to_string(world - 1) + "], got " + py_repr(rank) + " (" +
                                py_type_name(rank) + ")");
  long long value = 0;
  bool negative = false;
  if (!small_int(rank, value, negative))
    throw std::invalid_argument("rank=" + py_repr(rank) + " is outside the world of " + std::to_string(world) +
                                " ranks; accepted range [0, " + std::to_string(world - 1) + "]");
  return vd::CheckRank(dims, value);
}

vd::GroupKind parse_kind(const Value& kind) {
  if (kind.is_string()) {
    for (vd::GroupKind k : vd::kGroupKinds)
      if (kind.get<std::string>() == vd::GroupKindName(k)) return k;
  }
  throw std::invalid_argument("kind=" + py_repr(kind) + " is not a group kind; accepted: " + vd::GroupKindNames());
}

// An int >= 1 that fits an int32, else the Python port's TypeError/ValueError text naming `name` (TP-4.8).
int positive_int(const std::string& name, const Value& v) {
  if (!is_py_int(v))
    throw std::invalid_argument(name + " must be an int >= 1, got " + py_repr(v) + " (" + py_type_name(v) + ")");
  const std::string over = name + "=" + py_repr(v) + " is over " + std::to_string(INT_MAX) + ", more than this port counts";
  if (v.is_object()) {  // {"$int": text}: outside int64/uint64
    if (v["$int"].get<std::string>().rfind('-', 0) == 0)
      throw std::invalid_argument(name + " must be an int >= 1, got " + py_repr(v));
    throw std::invalid_argument(over);
  }
  if (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(INT_MAX))
    throw std::invalid_argument(over);
  const long long value = v.is_number_unsigned() ? static_cast<long long>(v.get<unsigned long long>()) : v.get<long long>();
  if (value < 1) throw std::invalid_argument(name + " must be an int >= 1, got " + py_repr(v));
  if (value > INT_MAX) throw std::invalid_argument(over);
  return static_cast<int>(value);
}

const Value& member(const Value& input, const char* name) {
  if (!input.is_object() || !input.contains(name))
    throw std::runtime_error(std::string("the input has no '") + name + "' (the call's arguments do not bind)");
  return input[name];
}

Value member_or(const Value& input, const char* name, Value fallback) {
  return input.is_object() && input.contains(name) ? input[name] : fallback;
}

Value int_list(const std::vector<int>& items) {
  Value out = Value::array();
  for (int x : items) out.push_back(x);
  return out;
}

Value int_rows(const std::vector<std::vector<int>>& rows) {
  Value out = Value::array();
  for (const auto& row : rows) out.push_back(int_list(row));
  return out;
}

}  // namespace gates::tp
