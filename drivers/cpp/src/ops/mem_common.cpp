// See mem_common.h.
#include "mem_common.h"

#include <algorithm>
#include <cmath>

#include "vllm/v1/field_checks.h"
#include "vllm/v1/str_repr.h"

namespace gates::mem {

using vllm::entrypoints::JsonInt;
using vllm::entrypoints::JsonIntKind;

Value Guarded(const Operation& body, const Value& input) {
  try {
    return body(input);
  } catch (const Raised&) {
    throw;
  } catch (const std::invalid_argument& err) {
    throw Raised("invalid-argument", err.what());
  } catch (const std::out_of_range& err) {
    throw Raised("invalid-argument", err.what());
  } catch (const std::overflow_error& err) {
    throw Raised("invalid-argument", err.what());
  } catch (const nlohmann::json::exception& err) {
    throw Raised("invalid-argument", std::string("malformed case input: ") + err.what());
  } catch (const std::runtime_error& err) {
    throw Raised("runtime-error", err.what());
  }
}

void Refuse(const std::string& message) { throw Raised("invalid-argument", message); }

int64_t ReadInt(const std::string& owner, const std::string& name, const Value& value, int64_t minimum) {
  int64_t v = 0;
  std::string digits;
  const JsonIntKind kind = value.is_boolean() ? JsonIntKind::kNot : JsonInt(value, &v, &digits);
  if (kind == JsonIntKind::kNot) {
    Refuse(owner + "." + name + " must be an int >= " + std::to_string(minimum) + ", got " + PyJsonRepr(value) + " (" +
           PyJsonTypeName(value) + ")");
  }
  if (kind == JsonIntKind::kBig) {
    if (!digits.empty() && digits[0] == '-') {
      Refuse(owner + "." + name + " must be an int >= " + std::to_string(minimum) + ", got " + digits);
    }
    Refuse(owner + "." + name + "=" + digits + " does not fit in an int64_t");
  }
  return vllm::v1::CheckInt(owner, name, v, minimum);
}

std::optional<int64_t> ReadOptionalInt(const std::string& owner, const std::string& name, const Value& value,
                                       int64_t minimum) {
  if (value.is_null()) return std::nullopt;
  return ReadInt(owner, name, value, minimum);
}

double ReadFraction(const std::string& owner, const std::string& name, const Value& value) {
  int64_t v = 0;
  std::string digits;
  double number = 0;
  if (!value.is_boolean() && value.is_number_float()) {
    number = value.get<double>();
  } else if (!value.is_boolean() && JsonInt(value, &v, &digits) != JsonIntKind::kNot) {
    number = digits.empty() ? static_cast<double>(v) : std::strtod(digits.c_str(), nullptr);
  } else {
    Refuse(owner + "." + name + " must be a finite float in (0, 1], got " + PyJsonRepr(value) + " (" +
           PyJsonTypeName(value) + ")");
  }
  if (!std::isfinite(number) || !(0.0 < number && number <= 1.0)) {
    Refuse(owner + "." + name + " must be a finite float in (0, 1], got " + PyJsonRepr(value));
  }
  return number;
}

std::optional<std::string> ReadOptionalStr(const std::string& owner, const std::string& name, const Value& value) {
  if (value.is_null()) return std::nullopt;
  if (!value.is_string()) {
    Refuse(owner + "." + name + " must be a str or None, got " + PyJsonRepr(value) + " (" + PyJsonTypeName(value) +
           ")");
  }
  return value.get<std::string>();
}

const Value* Member(const Value& object, const std::string& name) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(name);
  return it == object.end() ? nullptr : &*it;
}

const Value& Required(const Value& object, const std::string& name) {
  const Value* member = Member(object, name);
  if (member == nullptr) Refuse("case input has no " + vllm::v1::PyStrRepr(name) + " (KeyError)");
  return *member;
}

const Value& Mapping(const Value& value, const std::string& what) {
  if (!value.is_object()) Refuse(what + " must be a mapping, got " + PyJsonTypeName(value));
  return value;
}

Value DecimalValue(const std::string& digits) {
  if (digits.size() < 19 || (digits.size() == 19 && digits <= "9223372036854775807")) {
    return Value(static_cast<int64_t>(std::strtoll(digits.c_str(), nullptr, 10)));
  }
  if (digits.size() < 20 || (digits.size() == 20 && digits <= "18446744073709551615")) {
    return Value(static_cast<uint64_t>(std::strtoull(digits.c_str(), nullptr, 10)));
  }
  Value big = Value::object();
  big["$int"] = digits;
  return big;
}

std::string PySortedNames(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + vllm::v1::PyStrRepr(names[i]);
  return out + "]";
}

}  // namespace gates::mem
