#include "driver/pyrepr.h"

#include <cmath>
#include <cstdio>

namespace gates {

bool is_py_int(const Value& v) {
  return v.is_number_integer() || (v.is_object() && v.size() == 1 && v.contains("$int"));
}

std::string py_float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return Value(x).dump();  // nlohmann's shortest form matches Python's repr (1.0, 1e+16, 1e-05)
}

std::string py_str_repr(const std::string& text) {
  bool single = text.find('\'') != std::string::npos && text.find('"') == std::string::npos;
  char q = single ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(q)) out += std::string("\\") + q;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else out += static_cast<char>(c);
  }
  return out + q;
}

std::string py_repr(const Value& v) {
  switch (v.type()) {
    case Value::value_t::null: return "None";
    case Value::value_t::boolean: return v.get<bool>() ? "True" : "False";
    case Value::value_t::number_integer:
    case Value::value_t::number_unsigned: return v.dump();
    case Value::value_t::number_float: return py_float_repr(v.get<double>());
    case Value::value_t::string: return py_str_repr(v.get<std::string>());
    case Value::value_t::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + py_repr(v[i]);
      return out + "]";
    }
    case Value::value_t::object: {
      if (v.size() == 1 && v.contains("$int")) return v["$int"].get<std::string>();
      if (v.size() == 1 && v.contains("$wrong")) return "<wrong everywhere>";
      std::string out = "{";
      bool first = true;
      if (v.size() == 1 && v.contains("$map") && v["$map"].is_array()) {
        for (const auto& pair : v["$map"]) {
          out += (first ? "" : ", ") + py_repr(pair[0]) + ": " + py_repr(pair[1]);
          first = false;
        }
      } else {
        for (auto it = v.begin(); it != v.end(); ++it) {
          out += (first ? "" : ", ") + py_str_repr(it.key()) + ": " + py_repr(it.value());
          first = false;
        }
      }
      return out + "}";
    }
    default: return "?";
  }
}

std::string py_type_name(const Value& v) {
  switch (v.type()) {
    case Value::value_t::null: return "NoneType";
    case Value::value_t::boolean: return "bool";
    case Value::value_t::number_integer:
    case Value::value_t::number_unsigned: return "int";
    case Value::value_t::number_float: return "float";
    case Value::value_t::string: return "str";
    case Value::value_t::array: return "list";
    case Value::value_t::object:
      if (v.size() == 1 && v.contains("$int")) return "int";
      if (v.size() == 1 && v.contains("$wrong")) return "WrongEverywhere";
      return "dict";
    default: return "?";
  }
}

}  // namespace gates
