// Decoding wire data into gates::Value (docs/worker-protocol.md §7), refusing what the format does not allow
// with a ProtocolError whose message names the place, in the judge's path syntax (§7.3 "Refused values").
#include <cmath>
#include <cstdio>
#include <string>
#include <unordered_set>

#include "driver/framing.h"
#include "driver/plain.h"
#include "driver/plain_internal.h"

namespace gates {

std::string found(const Value& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a bool";
  if (v.is_number() || is_big_int_raw(v)) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

std::string key_text(const Value& k) {
  if (k.is_null()) return "None";
  if (k.is_boolean()) return k.get<bool>() ? "True" : "False";
  if (k.is_string()) return quote(k.get<std::string>());
  if (k.is_number_float()) {
    double x = k.get<double>();
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  }
  if (k.is_object() && k.contains("$int")) return k["$int"].get<std::string>();
  if (k.is_array()) {
    std::string text = "(";
    for (std::size_t i = 0; i < k.size(); ++i) text += (i ? ", " : "") + key_text(k[i]);
    return text + (k.size() == 1 ? ",)" : ")");
  }
  return k.dump();
}

namespace {

// What Python's dict would consider the same key: numbers by value (True == 1 == 1.0, 0.0 == -0.0), strings by
// text, tuples item by item. NaN is never equal to anything, so it gets no identity (returns "").
std::string key_identity(const Value& k) {
  if (k.is_null()) return "N";
  if (k.is_boolean()) return k.get<bool>() ? "I1" : "I0";
  if (k.is_number_integer()) return "I" + k.dump();
  if (k.is_string()) return "S" + k.get<std::string>();
  if (k.is_number_float()) {
    double x = k.get<double>();
    if (std::isnan(x)) return "";
    if (x == 0) return "I0";
    if (std::isinf(x)) return x > 0 ? "F+inf" : "F-inf";
    if (x == std::floor(x)) {
      char buf[400];
      std::snprintf(buf, sizeof buf, "%.0f", x);  // glibc writes the exact integer value
      return std::string("I") + buf;
    }
    return "F" + k.dump();
  }
  if (k.is_object() && k.contains("$int")) return "I" + k["$int"].get<std::string>();
  if (k.is_array()) {  // a decoded tuple
    std::string id = "T(";
    for (const auto& item : k) {
      std::string part = key_identity(item);
      if (part.empty()) return "";
      id += part + ",";
    }
    return id + ")";
  }
  return "";
}

class Decoder {
 public:
  Decoder(std::string root, BufferPool& pool) : root_(std::move(root)), pool_(pool) {}

  Value decode(const Value& data, const std::string& where, std::size_t depth, bool key) {
    if (data.is_null() || data.is_boolean() || data.is_number_integer() || data.is_string()) return data;
    if (data.is_number_float()) {
      if (!std::isfinite(data.get<double>())) refuse(where, "a bare non-finite float (JSON has none; $float tags them)");
      return data;
    }
    if (is_big_int_raw(data)) {
      std::string text = big_int_text(data);
      if (text.size() - (text[0] == '-' ? 1 : 0) > kMaxIntDigits) refuse(where, "an int with more than 4300 digits");
      return Value::object({{"$int", std::move(text)}});
    }
    if (data.is_array()) {
      if (key) refuse(where, "a list as a map key");
      check_depth(where, depth);
      Value out = Value::array();
      for (std::size_t i = 0; i < data.size(); ++i)
        out.push_back(decode(data[i], where + "[" + std::to_string(i) + "]", depth + 1, false));
      return out;
    }
    if (data.is_object()) return tagged(data, where, depth, key);
    refuse(where, "a value JSON does not have");
  }

 private:
  [[noreturn]] void refuse(const std::string& where, const std::string& message) {
    throw ProtocolError(root_ + " is not plain data: " + message + " at " + where);
  }

  void check_depth(const std::string& where, std::size_t depth) {
    if (depth >= kMaxDepth) refuse(where, "nesting deeper than 200 levels");
  }

  Value tagged(const Value& data, const std::string& where, std::size_t depth, bool key) {
    const std::string tag = data.size() == 1 ? data.begin().key() : std::string();
    if (tag != "$float" && tag != "$tuple" && tag != "$map" && tag != "$wrong" && tag != "$tensor") {
      std::string names;
      std::size_t n = 0;
      for (auto it = data.begin(); it != data.end() && n < 5; ++it, ++n) names += (n ? ", " : "") + quote(it.key()).substr(0, 40);
      refuse(where, "an object with keys [" + names + (data.size() > 5 ? ", ..." : "") +
                        "], not one of the tags $float, $tuple, $map, $wrong, $tensor");
    }
    const Value& body = data.begin().value();
    if (tag == "$float") {
      std::string s = body.is_string() ? body.get<std::string>() : std::string();
      if (s == "nan") return Value(std::nan(""));
      if (s == "inf") return Value(HUGE_VAL);
      if (s == "-inf") return Value(-HUGE_VAL);
      refuse(where, "$float of " + found(body) + ", not \"nan\", \"inf\" or \"-inf\"");
    }
    if (tag == "$tensor") {
      if (key) refuse(where, "a $tensor as a map key");
      try {
        return decode_tensor(body, pool_);
      } catch (const TagRefused& e) {
        refuse(where, e.what());
      }
    }
    if (tag == "$wrong") {
      if (key) refuse(where, "$wrong as a map key");
      if (!(body.is_boolean() && body.get<bool>())) refuse(where, "$wrong of " + found(body) + ", not true");
      return data;
    }
    if (!body.is_array()) refuse(where, tag + " of " + found(body) + ", not an array");
    if (tag == "$map" && key) refuse(where, "a $map as a map key");
    check_depth(where, depth);
    if (tag == "$tuple") {
      Value out = Value::array();
      for (std::size_t i = 0; i < body.size(); ++i)
        out.push_back(decode(body[i], where + "[" + std::to_string(i) + "]", depth + 1, key));
      return out;
    }
    return mapping(body, where, depth);
  }

  Value mapping(const Value& pairs, const std::string& where, std::size_t depth) {
    Value items = Value::array();
    std::unordered_set<std::string> seen;
    bool all_strings = true;
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const Value& pair = pairs[i];
      const std::string key_where = where + ".<key " + std::to_string(i) + ">";
      if (!pair.is_array() || pair.size() != 2)
        refuse(key_where, "a $map entry that is " + found(pair) + ", not a [key, value] array");
      Value k = decode(pair[0], key_where, depth + 1, true);
      std::string id = key_identity(k);
      if (!id.empty() && !seen.insert(id).second)
        refuse(key_where, "key " + key_text(k) + " collides with an earlier key (a Python dict merges them)");
      all_strings = all_strings && k.is_string();
      Value v = decode(pair[1], where + "[" + key_text(k) + "]", depth + 1, false);
      items.push_back(Value::array({std::move(k), std::move(v)}));
    }
    // A one-member map whose key starts with '$' stays tagged, so that it never reads as a tag.
    bool tag_like = all_strings && items.size() == 1 && items[0][0].get<std::string>().rfind('$', 0) == 0;
    if (!all_strings || tag_like) return Value::object({{"$map", std::move(items)}});
    Value out = Value::object();
    for (auto& item : items) out[item[0].get<std::string>()] = std::move(item[1]);
    return out;
  }

  std::string root_;
  BufferPool& pool_;
};

}  // namespace

Value decode(const Value& wire, const std::string& root) {
  BufferPool none(nullptr, kDefaultMaxBufferBytes);  // a $tensor is refused for want of buffers, whatever its size
  return Decoder(root, none).decode(wire, root, 0, false);
}

Value decode(const Value& wire, const std::string& root, std::vector<Bytes>& buffers, std::uint64_t max_buffer_bytes) {
  BufferPool pool(&buffers, max_buffer_bytes);
  Value value = Decoder(root, pool).decode(wire, root, 0, false);
  long unused = pool.first_unused();
  if (unused >= 0)
    throw ProtocolError(root + " is not plain data: buffer " + std::to_string(unused) + " of the message's " +
                        std::to_string(buffers.size()) + " is used by no $tensor in " + root);
  return value;
}

}  // namespace gates
