// Exact parsing of wire JSON with nlohmann's SAX interface (docs/worker-protocol.md §3, §12 "pitfalls"):
// nlohmann reads an integer beyond uint64 as a double; here number_float gets the raw text, and a number written
// without '.', 'e' or 'E' is kept as its decimal text (a binary value with subtype kBigIntSubtype, which JSON text
// itself can never produce) for decode() to turn into {"$int": text}.
#include <cmath>
#include <string>
#include <vector>

#include "driver/plain.h"
#include "driver/plain_internal.h"

namespace gates {
namespace {

// nlohmann's lexer refuses an integer beyond a double's range (~1e308) before the SAX sees it. Such tokens are
// swapped for a float token no JSON writer produces (kBigMarker + its index), and swapped back in number_float.
const std::string kBigMarker = "0e-0000000000";

bool has_long_digit_run(const std::string& text) {
  std::size_t run = 0;
  for (char c : text) {
    run = (c >= '0' && c <= '9') ? run + 1 : 0;
    if (run >= 300) return true;
  }
  return false;
}

std::string swap_out_huge_ints(const std::string& text, std::vector<std::string>& huge) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (std::size_t i = 0; i < text.size();) {
    char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      ++i;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      ++i;
      continue;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      std::size_t end = i + (c == '-' ? 1 : 0);
      while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
      bool integer = end == text.size() || (text[end] != '.' && text[end] != 'e' && text[end] != 'E');
      std::size_t digits = end - i - (c == '-' ? 1 : 0);
      if (integer && digits >= 300) {
        huge.push_back(text.substr(i, end - i));
        out += kBigMarker + std::to_string(huge.size() - 1);
      } else {
        out.append(text, i, end - i);
      }
      i = end;
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

class ExactSax {
 public:
  using number_integer_t = Value::number_integer_t;
  using number_unsigned_t = Value::number_unsigned_t;
  using number_float_t = Value::number_float_t;
  using string_t = Value::string_t;
  using binary_t = Value::binary_t;

  bool null() { return put(Value(nullptr)); }
  bool boolean(bool v) { return put(Value(v)); }
  bool number_integer(number_integer_t v) { return put(Value(v)); }
  bool number_unsigned(number_unsigned_t v) { return put(Value(v)); }
  bool number_float(number_float_t v, const string_t& text) {
    if (huge != nullptr && text.size() > kBigMarker.size() && text.compare(0, kBigMarker.size(), kBigMarker) == 0) {
      std::size_t index = std::stoul(text.substr(kBigMarker.size()));
      if (index < huge->size()) return put(big_int_raw((*huge)[index]));
    }
    if (text.find_first_of(".eE") == string_t::npos) {  // an integer too big for 64 bits
      return put(big_int_raw(text));  // decode() refuses one of more than 4300 digits, naming the place
    }
    if (!std::isfinite(v)) return fail("a number that overflows a double: " + text.substr(0, 40));
    return put(Value(v));
  }
  bool string(string_t& v) { return put(Value(std::move(v))); }
  bool binary(binary_t&) { return fail("binary data"); }
  bool start_object(std::size_t) { return open(Value::object()); }
  bool key(string_t& k) {
    Value& obj = *stack_.back();
    if (obj.contains(k)) return fail("a JSON object repeats the key " + quote(k));
    key_ = std::move(k);
    return true;
  }
  bool end_object() { stack_.pop_back(); return true; }
  bool start_array(std::size_t) { return open(Value::array()); }
  bool end_array() { stack_.pop_back(); return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    return fail(std::string("not JSON: ") + ex.what());
  }

  Value root;
  std::string error;
  const std::vector<std::string>* huge = nullptr;  // the integers swapped out of the text, by index

 private:
  bool fail(const std::string& why) {
    if (error.empty()) error = why;
    return false;
  }
  Value* place(Value v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    Value& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    Value& slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }
  bool put(Value v) {
    place(std::move(v));
    return true;
  }
  bool open(Value v) {
    // A $map level takes three JSON levels (object, pairs, pair). Nesting past what 200 plain levels can take
    // is refused here (the frame is then broken); within it, decode() refuses past 200 levels with a path.
    if (stack_.size() > 3 * kMaxDepth + 16) return fail("nesting far deeper than 200 levels");
    stack_.push_back(place(std::move(v)));
    return true;
  }

  std::vector<Value*> stack_;
  std::string key_;
};

}  // namespace

Value parse_exact(const std::string& text) {
  ExactSax sax;
  std::vector<std::string> huge;
  bool ok;
  if (has_long_digit_run(text)) {
    const std::string swapped = swap_out_huge_ints(text, huge);
    sax.huge = &huge;
    ok = Value::sax_parse(swapped, &sax, nlohmann::detail::input_format_t::json, true, false);
  } else {
    ok = Value::sax_parse(text, &sax, nlohmann::detail::input_format_t::json, true, false);
  }
  if (!ok) throw ProtocolError(sax.error.empty() ? std::string("not JSON") : sax.error);
  return std::move(sax.root);
}

}  // namespace gates
