// CAPI-ABI operations that carry parameters through the struct: model-params-member-write (gate member-write: an int
// assigned to one member), round-trip (gate round-trip: EngineParams -> vllm_model_params -> a member-by-member copy
// -> EngineParams) and pool-from-v16-struct (gate zero-struct: a v16
// struct holding v15 members sizes the pool as v15 did). Inputs as gates/rows/capi_abi/build.py engine_params and
// v15_struct.
#include <algorithm>

#include "capi_common.h"
#include "mem_params.h"
#include "vllm/capi/convert.h"
#include "vllm/entrypoints/json_repr.h"

namespace gates::capi {

// A struct member's raw value from case data, as ctypes stores it: text (UTF-8) or a list of byte values for a
// string member, an int within the member's C type (OverflowError otherwise), a number for the double.
void SetRawMember(vllm::capi::OwnedModelParams& out, const vllm::capi::MemberInfo& member, const Value& value);

namespace {

using vllm::capi::MemberInfo;
using vllm::capi::MemberKind;

// Code points as generalised UTF-8 (a surrogate gets its three-byte form, which no UTF-8 reader accepts).
std::string Wtf8(const Value& points) {
  std::string out;
  for (const Value& p : points) {
    if (!p.is_number_integer() || p.is_boolean()) throw std::invalid_argument("code_points must be ints");
    const int64_t c = p.get<int64_t>();
    if (c < 0 || c > 0x10FFFF) throw std::invalid_argument("chr() arg not in range(0x110000)");
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// build.py _text_field: {code_points: [ints]} is the text of those code points.
Value TextFields(const Value& fields) {
  if (!fields.is_object()) return fields;
  Value out = Value::object();
  for (auto it = fields.begin(); it != fields.end(); ++it) {
    const Value& v = it.value();
    if (v.is_object()) {
      if (v.size() != 1 || !v.contains("code_points") || !v["code_points"].is_array())
        throw std::invalid_argument("a text field given as a mapping must be {code_points: [ints]}, got " +
                                    vllm::entrypoints::PyJsonRepr(v));
      out[it.key()] = Wtf8(v["code_points"]);
    } else {
      out[it.key()] = v;
    }
  }
  return out;
}

// An int assigned to an integer member of a fresh struct, read back (gate member-write): SetRawMember refuses what
// the member's C type cannot hold (overflow_error, invalid-argument) instead of wrapping it.
GATES_CAPI_OPERATION("model-params-member-write", [](const Value& input) -> Value {
  const std::string name = input.at("member").get<std::string>();
  const MemberInfo& member = vllm::capi::MemberOf(name);
  if (member.kind != MemberKind::kInt32 && member.kind != MemberKind::kInt64)
    throw std::invalid_argument("vllm_model_params has no int32_t or int64_t member '" + name + "'");
  vllm::capi::OwnedModelParams params;
  SetRawMember(params, member, input.at("value"));
  return vllm::capi::ReadMember(params.params, member).integer;
});

GATES_CAPI_OPERATION("round-trip", [](const Value& input) -> Value {
  const vllm::entrypoints::EngineParams params = gates::mem::EngineParamsFrom(TextFields(input));
  const vllm::capi::OwnedModelParams written = vllm::capi::ModelParamsFromEngine(params);
  const vllm::capi::OwnedModelParams copied = vllm::capi::CopyModelParams(written.params);
  return Describe(vllm::capi::EngineParamsFromC(copied.params));
});

GATES_CAPI_OPERATION("pool-from-v16-struct", [](const Value& input) -> Value {
  const Value* v15 = Find(input, "v15");
  const Value members = v15 == nullptr ? Value::object() : *v15;
  std::vector<std::string> late;
  for (const char* name : {"gpu_memory_utilization", "kv_cache_memory_bytes"})
    if (Find(members, name) != nullptr) late.push_back(name);
  if (!late.empty()) {
    std::string listed;
    for (size_t i = 0; i < late.size(); ++i) listed += (i ? ", '" : "'") + late[i] + "'";
    throw std::invalid_argument("the zero-struct gate sets v15 members only, got [" + listed + "]");
  }
  const vllm::v1::KVCacheConfig probe = ProbeConfig(Find(input, "probe"));
  vllm::capi::OwnedModelParams params;
  for (auto it = members.begin(); it != members.end(); ++it)
    SetRawMember(params, vllm::capi::MemberOf(it.key()), it.value());
  const vllm::entrypoints::EngineParams engine = vllm::capi::EngineParamsFromC(params.params);
  const vllm::entrypoints::PoolSizing pool = vllm::entrypoints::LoadedEngine::ResolveKVPool(engine, probe);
  Value out = Value::object();
  out["num_blocks"] = pool.num_blocks;
  out["warnings"] = pool.warning ? Value::array({"UtilizationNotAppliedWarning"}) : Value::array();
  return out;
});

}  // namespace

void SetRawMember(vllm::capi::OwnedModelParams& out, const MemberInfo& member, const Value& value) {
  const std::string name = member.name;
  switch (member.kind) {
    case MemberKind::kString:
      if (value.is_null()) {
        out.SetString(member, std::nullopt);
      } else if (value.is_string()) {
        out.SetString(member, value.get<std::string>());
      } else if (value.is_array()) {
        std::string bytes;
        for (const Value& b : value) {
          if (!b.is_number_integer() || b.get<int64_t>() < 0 || b.get<int64_t>() > 255)
            throw std::invalid_argument("bytes must be in range(0, 256)");
          bytes += static_cast<char>(b.get<int64_t>());
        }
        out.SetString(member, bytes.substr(0, bytes.find('\0')));
      } else {
        throw std::invalid_argument("vllm_model_params." + name + " takes bytes or None, got " +
                                    vllm::entrypoints::PyJsonTypeName(value));
      }
      return;
    case MemberKind::kInt32:
    case MemberKind::kInt64: {
      const bool narrow = member.kind == MemberKind::kInt32;
      const std::string ctype = narrow ? "int32_t" : "int64_t";
      const std::string range = narrow ? "-2147483648..2147483647" : "-9223372036854775808..9223372036854775807";
      int64_t v = 0;
      std::string digits;
      const auto kind = value.is_boolean() ? vllm::entrypoints::JsonIntKind::kNot
                                           : vllm::entrypoints::JsonInt(value, &v, &digits);
      if (kind == vllm::entrypoints::JsonIntKind::kNot)
        throw std::invalid_argument("int expected instead of " + vllm::entrypoints::PyJsonTypeName(value));
      if (kind == vllm::entrypoints::JsonIntKind::kBig || (narrow && (v < INT32_MIN || v > INT32_MAX))) {
        throw std::overflow_error("vllm_model_params." + name + " is an " + ctype + ": " +
                                  (digits.empty() ? std::to_string(v) : digits) + " does not fit (accepted: " +
                                  range + "); ctypes would wrap it, so it is refused");
      }
      out.SetInt(member, v);
      return;
    }
    case MemberKind::kDouble:
      if (value.is_boolean() || !value.is_number())
        throw std::invalid_argument("must be real number, not " + vllm::entrypoints::PyJsonTypeName(value));
      out.SetDouble(member, value.get<double>());
      return;
    case MemberKind::kOther:
      throw std::invalid_argument("vllm_model_params." + name + " has a C type this binding does not write");
  }
}

}  // namespace gates::capi
