// Encoding a gates::Value as wire JSON text (docs/worker-protocol.md §7): every object becomes a $map (unless it
// is one of the tags operation.h lists), non-finite doubles become $float, {"$int": text} becomes a bare integer.
#include <cmath>
#include <string>

#include "driver/plain.h"
#include "driver/plain_internal.h"

namespace gates {
namespace {

class Encoder {
 public:
  bool exact = false;

  void value(const Value& v, std::string& out, std::size_t depth) {
    switch (v.type()) {
      case Value::value_t::null: out += "null"; return;
      case Value::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
      case Value::value_t::number_integer:
      case Value::value_t::number_unsigned: out += v.dump(); return;
      case Value::value_t::number_float: number(v.get<double>(), out); return;
      case Value::value_t::string: string(v.get_ref<const std::string&>(), out); return;
      case Value::value_t::array: list(v, out, depth); return;
      case Value::value_t::object: object(v, out, depth); return;
      case Value::value_t::binary:
        if (is_big_int_raw(v)) return big_int(big_int_text(v), out);
        throw NotPlain("result is not plain data: binary data");
      default: throw NotPlain("result is not plain data: a discarded JSON value");
    }
  }

 private:
  // A map key: a list there can only be a decoded tuple, so it goes back as $tuple.
  void key(const Value& k, std::string& out, std::size_t depth) {
    if (!k.is_array()) return value(k, out, depth);
    nest(depth);
    out += "{\"$tuple\":[";
    bool first = true;
    for (const auto& item : k) {
      if (!first) out += ',';
      first = false;
      key(item, out, depth + 1);
    }
    out += "]}";
  }

  void string(const std::string& text, std::string& out) {
    try {
      out += quote(text);
    } catch (const nlohmann::json::type_error&) {
      throw NotPlain("result is not plain data: a string that is not valid UTF-8");
    }
  }

  void number(double x, std::string& out) {
    if (std::isnan(x)) out += "{\"$float\":\"nan\"}";
    else if (std::isinf(x)) out += x > 0 ? "{\"$float\":\"inf\"}" : "{\"$float\":\"-inf\"}";
    else out += Value(x).dump();  // shortest round-trip text; integral doubles keep ".0"
  }

  void big_int(const std::string& text, std::string& out) {
    if (!is_int_text(text)) throw NotPlain("result is not plain data: $int of " + quote(text.substr(0, 40)));
    exact = true;
    out += text;
  }

  void nest(std::size_t depth) {
    if (depth >= kMaxDepth) throw NotPlain("result is not plain data: nested deeper than 200 levels");
  }

  void list(const Value& v, std::string& out, std::size_t depth) {
    nest(depth);
    out += '[';
    bool first = true;
    for (const auto& item : v) {
      if (!first) out += ',';
      first = false;
      value(item, out, depth + 1);
    }
    out += ']';
  }

  void object(const Value& v, std::string& out, std::size_t depth) {
    if (v.size() == 1) {
      const std::string& tag = v.begin().key();
      const Value& body = v.begin().value();
      if (tag == "$int" && body.is_string()) return big_int(body.get<std::string>(), out);
      if (tag == "$wrong" && body.is_boolean() && body.get<bool>()) {
        out += "{\"$wrong\":true}";
        return;
      }
      if (tag == "$float" && body.is_string()) {
        const std::string& s = body.get_ref<const std::string&>();
        if (s == "nan" || s == "inf" || s == "-inf") {
          out += "{\"$float\":" + quote(s) + "}";
          return;
        }
      }
      if (tag == "$tuple" && body.is_array()) {
        out += "{\"$tuple\":";
        list(body, out, depth);
        out += '}';
        return;
      }
      if (tag == "$map" && body.is_array()) {
        nest(depth);
        out += "{\"$map\":[";
        bool first = true;
        for (const auto& pair : body) {
          if (!pair.is_array() || pair.size() != 2)
            throw NotPlain("result is not plain data: a $map entry that is not a [key, value] pair");
          if (!first) out += ',';
          first = false;
          out += '[';
          key(pair[0], out, depth + 1);
          out += ',';
          value(pair[1], out, depth + 1);
          out += ']';
        }
        out += "]}";
        return;
      }
    }
    nest(depth);
    out += "{\"$map\":[";
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += ',';
      first = false;
      out += '[' + quote(it.key()) + ',';
      value(it.value(), out, depth + 1);
      out += ']';
    }
    out += "]}";
  }
};

}  // namespace

std::string quote(const std::string& text) {
  // nlohmann's serializer escapes what JSON needs and refuses invalid UTF-8 (type_error 316).
  return Value(text).dump(-1, ' ', false, Value::error_handler_t::strict);
}

std::string encode(const Value& value, bool& exact) {
  Encoder encoder;
  std::string out;
  encoder.value(value, out, 0);
  exact = encoder.exact;
  return out;
}

}  // namespace gates
