// Shared by the plain-data parser, decoder and encoder (not for operations).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "driver/operation.h"

namespace gates {

constexpr std::size_t kMaxDepth = 200;       // lists, tuples and maps nested in one another (§7.1)
constexpr std::size_t kMaxIntDigits = 4300;  // Python's limit on int <-> decimal text
constexpr std::uint64_t kBigIntSubtype = 0x62;  // a parsed integer beyond 64 bits, carried as binary

inline Value big_int_raw(const std::string& text) {
  return Value::binary(Value::binary_t::container_type(text.begin(), text.end()), kBigIntSubtype);
}

inline bool is_big_int_raw(const Value& v) {
  return v.is_binary() && v.get_binary().has_subtype() && v.get_binary().subtype() == kBigIntSubtype;
}

inline std::string big_int_text(const Value& v) {
  const auto& bytes = v.get_binary();
  return std::string(bytes.begin(), bytes.end());
}

// "-?[0-9]+" with no leading zeros (other than "0" itself), at most kMaxIntDigits digits.
inline bool is_int_text(const std::string& text) {
  std::size_t start = (!text.empty() && text[0] == '-') ? 1 : 0;
  std::size_t digits = text.size() - start;
  if (digits == 0 || digits > kMaxIntDigits) return false;
  if (digits > 1 && text[start] == '0') return false;
  for (std::size_t i = start; i < text.size(); ++i)
    if (text[i] < '0' || text[i] > '9') return false;
  return true;
}

}  // namespace gates
