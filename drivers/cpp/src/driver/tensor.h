// A small tensor type for operations (issue 29 item 1; protocol version 2, docs/worker-protocol.md §12): a dtype
// with the wire's numpy names, a shape of int64 dims, and the elements as contiguous row-major little-endian bytes.
// In a gates::Value a tensor is {"$tensor": {"dtype": D, "shape": [...], "data": <binary>}}: tensor_of() and
// tensor_value() convert, the driver moves the frame's buffers in and out of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "driver/operation.h"

namespace gates {

enum class DType { Bool, UInt8, Int8, Int16, Int32, Int64, Float16, BFloat16, Float32, Float64 };

using Bytes = std::vector<std::uint8_t>;

constexpr std::size_t kMaxTensorDims = 64;
constexpr std::uint64_t kTensorSubtype = 0x74;  // the binary subtype of a tensor's bytes inside a Value

// The wire name ("float32", "bfloat16", ...), and back (nullopt for a name that is not one of the ten).
const char* dtype_name(DType dtype);
std::optional<DType> dtype_named(const std::string& name);
// "bool, uint8, ..., float64": the names a refusal lists.
std::string dtype_names();
std::size_t itemsize(DType dtype);

// The byte size of a tensor of that dtype and shape, or nullopt when a dim is negative, there are more than
// kMaxTensorDims dims, or the count overflows 64 bits.
std::optional<std::uint64_t> tensor_nbytes(DType dtype, const std::vector<std::int64_t>& shape);

// A shape as Python writes a tuple of ints: "()", "(3,)", "(2, 3)".
std::string shape_text(const std::vector<std::int64_t>& shape);

// IEEE conversions between float32 and the 16-bit formats: to float32 exact, from float32 rounded to nearest
// even; inf stays inf, a value past the largest finite becomes inf, subnormals are kept (never flushed), a NaN
// stays a NaN of the same sign, quieted, with the top bits of its payload.
float bfloat16_to_float32(std::uint16_t bits);
std::uint16_t float32_to_bfloat16(float value);
float float16_to_float32(std::uint16_t bits);
std::uint16_t float32_to_float16(float value);

class Tensor {
 public:
  // Zero-filled. std::invalid_argument naming the shape when tensor_nbytes refuses it.
  Tensor(DType dtype, std::vector<std::int64_t> shape);
  // Takes `bytes` (row-major, little-endian); std::invalid_argument unless its size is the shape's byte size.
  Tensor(DType dtype, std::vector<std::int64_t> shape, Bytes bytes);

  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::size_t numel() const { return bytes_.size() / itemsize(dtype_); }
  const Bytes& bytes() const { return bytes_; }
  Bytes& bytes() { return bytes_; }

  // Element `i` (flat, row-major) in its own C++ type: bool, uint8_t, int8_t, int16_t, int32_t, int64_t, float
  // (float32), double (float64), and uint16_t for the raw bits of float16/bfloat16. std::logic_error when T is not
  // the dtype's type, std::out_of_range past the end.
  template <typename T>
  T get(std::size_t i) const;
  template <typename T>
  void set(std::size_t i, T value);

  // Any floating dtype as float32 (float64 rounded to nearest), and back (rounded to nearest even for the 16-bit
  // formats); std::logic_error for an integer or bool dtype.
  float get_float32(std::size_t i) const;
  void set_float32(std::size_t i, float value);
  // Any dtype as a double (int64 beyond 2^53 rounded); set_float64 stores into float32/float64 (rounded) and,
  // through float32, into float16/bfloat16.
  double get_float64(std::size_t i) const;
  void set_float64(std::size_t i, double value);

  // Element by element into another floating dtype (through float32 for the 16-bit formats, as torch does).
  Tensor to(DType dtype) const;

 private:
  void check_index(std::size_t i) const;
  DType dtype_;
  std::vector<std::int64_t> shape_;
  Bytes bytes_;
};

// A Value holding the tensor (its bytes moved in, not copied).
Value tensor_value(Tensor tensor);
// Whether `value` is a decoded tensor ({"$tensor": {..., "data": <binary>}}).
bool is_tensor_value(const Value& value);
// The tensor a Value holds (its bytes copied); std::invalid_argument when it holds none.
Tensor tensor_of(const Value& value);
// Its bytes without copying; std::invalid_argument when `value` holds no tensor.
const Bytes& tensor_bytes(const Value& value);

}  // namespace gates
