// Shared by the plain-data parser, decoder and encoder (not for operations).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "driver/operation.h"
#include "driver/tensor.h"

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

// What a refused wire value was, for messages: "null", "a bool", "a number", "a string", "an array", "an object".
std::string found(const Value& v);

// A decoded map key as a path writes it: strings in JSON quotes, tuples as Python writes them.
std::string key_text(const Value& k);

// A `$tensor` tag's problem, without the place: the decoder or encoder adds the path.
struct TagRefused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The buffers of the message being decoded (wire-v2 "The $tensor value"): each goes to the one `$tensor` that
// names it, and none may be left over. Without buffers (null) every `$tensor` is refused.
class BufferPool {
 public:
  BufferPool(std::vector<Bytes>* buffers, std::uint64_t max_buffer_bytes);
  // Buffer `index`, moved out once its length is `nbytes`; TagRefused for an index out of range, a buffer taken
  // before, or a length that differs.
  Bytes take(std::uint64_t index, std::uint64_t nbytes, const std::string& tensor);
  // The first buffer no `$tensor` took, or -1 when all were.
  long first_unused() const;
  std::size_t count() const { return buffers_ ? buffers_->size() : 0; }
  std::uint64_t max_buffer_bytes() const { return max_buffer_bytes_; }

 private:
  std::vector<Bytes>* buffers_;
  std::vector<bool> used_;
  std::uint64_t max_buffer_bytes_;
};

// Where an encoded result's tensors go (their bytes by address, not copied), within the limits on count and bytes
// per message; null `buffers` (the --lines mode) refuses every tensor.
struct BufferSink {
  std::vector<const Bytes*>* buffers;
  std::uint64_t max_buffer_bytes;
  std::uint64_t total = 0;
};

// The decoded value of a `$tensor` tag's body {"dtype": D, "shape": [...], "buffer": i}; TagRefused naming what
// is wrong (dtype, shape, buffer index or length, a bool byte other than 0 and 1).
Value decode_tensor(const Value& body, BufferPool& pool);

// Writes a decoded tensor's body as {"$tensor":{"dtype":D,"shape":[...],"buffer":i}} and hands its bytes to the
// sink; TagRefused when the value is not a well-formed tensor or the sink's limits would be passed.
void encode_tensor(const Value& body, std::string& out, BufferSink& sink);

}  // namespace gates
