// Encoding a gates::Value as wire JSON text (docs/worker-protocol.md §7): every object becomes a $map (unless it
// is one of the tags operation.h lists), non-finite doubles become $float, {"$int": text} becomes a bare integer,
// a tensor (tensor.h) a $tensor tag with its bytes in a buffer. A refusal names the place, as the Python worker's
// does (`result[2]["bytes"]`): the path is put together while the refusal unwinds, so encoding builds none.
#include <cmath>
#include <string>

#include "driver/plain.h"
#include "driver/plain_internal.h"

namespace gates {
namespace {

// A refusal on its way out: `path` grows by one step at each level it leaves.
struct Refused {
  std::string what;
  std::string path;
};

[[noreturn]] void refuse(const std::string& what) { throw Refused{what, std::string()}; }

class Encoder {
 public:
  explicit Encoder(BufferSink sink) : sink_(sink) {}
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
        refuse("binary data");
      default: refuse("a discarded JSON value");
    }
  }

 private:
  // A map key: a list there can only be a decoded tuple, so it goes back as $tuple.
  void key(const Value& k, std::string& out, std::size_t depth) {
    if (is_tensor_value(k)) refuse("a tensor as a map key");
    if (!k.is_array()) return value(k, out, depth);
    nest(depth);
    out += "{\"$tuple\":[";
    for (std::size_t i = 0; i < k.size(); ++i) {
      if (i) out += ',';
      try {
        key(k[i], out, depth + 1);
      } catch (Refused& r) {
        r.path = "[" + std::to_string(i) + "]" + r.path;
        throw;
      }
    }
    out += "]}";
  }

  void string(const std::string& text, std::string& out) {
    try {
      out += quote(text);
    } catch (const nlohmann::json::type_error&) {
      refuse("a string that is not valid UTF-8");
    }
  }

  void number(double x, std::string& out) {
    if (std::isnan(x)) out += "{\"$float\":\"nan\"}";
    else if (std::isinf(x)) out += x > 0 ? "{\"$float\":\"inf\"}" : "{\"$float\":\"-inf\"}";
    else out += Value(x).dump();  // shortest round-trip text; integral doubles keep ".0"
  }

  void big_int(const std::string& text, std::string& out) {
    if (!is_int_text(text)) refuse("$int of " + quote(text.substr(0, 40)));
    exact = true;
    out += text;
  }

  void nest(std::size_t depth) {
    if (depth >= kMaxDepth) refuse("nested deeper than 200 levels");
  }

  void list(const Value& v, std::string& out, std::size_t depth) {
    nest(depth);
    out += '[';
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      try {
        value(v[i], out, depth + 1);
      } catch (Refused& r) {
        r.path = "[" + std::to_string(i) + "]" + r.path;
        throw;
      }
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
      if (tag == "$tensor") {
        try {
          return encode_tensor(body, out, sink_);
        } catch (const TagRefused& e) {
          refuse(e.what());
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
        for (std::size_t i = 0; i < body.size(); ++i) {
          const Value& pair = body[i];
          if (!pair.is_array() || pair.size() != 2) refuse("a $map entry that is not a [key, value] pair");
          if (i) out += ',';
          out += '[';
          try {
            key(pair[0], out, depth + 1);
          } catch (Refused& r) {
            r.path = ".<key " + std::to_string(i) + ">" + r.path;
            throw;
          }
          out += ',';
          try {
            value(pair[1], out, depth + 1);
          } catch (Refused& r) {
            r.path = "[" + key_text(pair[0]) + "]" + r.path;
            throw;
          }
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
      try {
        value(it.value(), out, depth + 1);
      } catch (Refused& r) {
        r.path = "[" + quote(it.key()) + "]" + r.path;
        throw;
      }
      out += ']';
    }
    out += "]}";
  }

  BufferSink sink_;
};

std::string encode_with(const Value& value, bool& exact, BufferSink sink) {
  Encoder encoder(sink);
  std::string out;
  try {
    encoder.value(value, out, 0);
  } catch (const Refused& r) {
    throw NotPlain("result is not plain data: " + r.what + " at result" + r.path);
  }
  exact = encoder.exact;
  return out;
}

}  // namespace

std::string quote(const std::string& text) {
  // nlohmann's serializer escapes what JSON needs and refuses invalid UTF-8 (type_error 316).
  return Value(text).dump(-1, ' ', false, Value::error_handler_t::strict);
}

std::string encode(const Value& value, bool& exact) { return encode_with(value, exact, BufferSink{nullptr, 0}); }

std::string encode(const Value& value, bool& exact, std::vector<const Bytes*>& buffers, std::uint64_t max_buffer_bytes) {
  return encode_with(value, exact, BufferSink{&buffers, max_buffer_bytes});
}

}  // namespace gates
