// The tensor type of tensor.h: dtype names, byte sizes, IEEE 16-bit conversions and element access.
#include "driver/tensor.h"

#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace gates {
namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  std::size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::Bool, "bool", 1},       {DType::UInt8, "uint8", 1},       {DType::Int8, "int8", 1},
    {DType::Int16, "int16", 2},     {DType::Int32, "int32", 4},       {DType::Int64, "int64", 8},
    {DType::Float16, "float16", 2}, {DType::BFloat16, "bfloat16", 2}, {DType::Float32, "float32", 4},
    {DType::Float64, "float64", 8},
};

const DTypeInfo& dtype_info(DType dtype) {
  for (const auto& entry : kDTypes)
    if (entry.dtype == dtype) return entry;
  throw std::logic_error("a DType value outside the enum");
}

std::uint32_t float_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

float bits_float(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

// The unsigned integer of a C++ element type's size: elements are stored and loaded through it, byte by byte in
// little-endian order, whatever the host's order.
template <typename T>
using Unsigned = std::conditional_t<sizeof(T) == 1, std::uint8_t,
                                    std::conditional_t<sizeof(T) == 2, std::uint16_t,
                                                       std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;

template <typename T>
T load_le(const std::uint8_t* at) {
  Unsigned<T> raw = 0;
  for (std::size_t k = 0; k < sizeof(T); ++k) raw = static_cast<Unsigned<T>>(raw | (Unsigned<T>(at[k]) << (8 * k)));
  T value;
  std::memcpy(&value, &raw, sizeof(T));
  return value;
}

template <typename T>
void store_le(std::uint8_t* at, T value) {
  Unsigned<T> raw;
  std::memcpy(&raw, &value, sizeof(T));
  for (std::size_t k = 0; k < sizeof(T); ++k) at[k] = static_cast<std::uint8_t>(raw >> (8 * k));
}

// Whether T is the C++ type get/set use for that dtype.
template <typename T>
bool stores_dtype(DType dtype) {
  switch (dtype) {
    case DType::Bool: return std::is_same<T, bool>::value;
    case DType::UInt8: return std::is_same<T, std::uint8_t>::value;
    case DType::Int8: return std::is_same<T, std::int8_t>::value;
    case DType::Int16: return std::is_same<T, std::int16_t>::value;
    case DType::Int32: return std::is_same<T, std::int32_t>::value;
    case DType::Int64: return std::is_same<T, std::int64_t>::value;
    case DType::Float16:
    case DType::BFloat16: return std::is_same<T, std::uint16_t>::value;
    case DType::Float32: return std::is_same<T, float>::value;
    case DType::Float64: return std::is_same<T, double>::value;
  }
  return false;
}

bool is_floating(DType dtype) {
  return dtype == DType::Float16 || dtype == DType::BFloat16 || dtype == DType::Float32 || dtype == DType::Float64;
}

const Value& tensor_body(const Value& value) {
  if (!is_tensor_value(value)) throw std::invalid_argument("the value holds no tensor: " + value.dump().substr(0, 200));
  return value.begin().value();
}

}  // namespace

const char* dtype_name(DType dtype) { return dtype_info(dtype).name; }

std::optional<DType> dtype_named(const std::string& name) {
  for (const auto& entry : kDTypes)
    if (name == entry.name) return entry.dtype;
  return std::nullopt;
}

std::string dtype_names() {
  std::string names;
  for (const auto& entry : kDTypes) names += (names.empty() ? "" : ", ") + std::string(entry.name);
  return names;
}

std::size_t itemsize(DType dtype) { return dtype_info(dtype).size; }

std::optional<std::uint64_t> tensor_nbytes(DType dtype, const std::vector<std::int64_t>& shape) {
  if (shape.size() > kMaxTensorDims) return std::nullopt;
  std::uint64_t total = itemsize(dtype);
  bool empty = false;
  for (std::int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (dim == 0) empty = true;
  }
  if (empty) return 0;
  for (std::int64_t dim : shape) {
    if (total > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(dim)) return std::nullopt;
    total *= static_cast<std::uint64_t>(dim);
  }
  return total;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

float bfloat16_to_float32(std::uint16_t bits) { return bits_float(std::uint32_t(bits) << 16); }

std::uint16_t float32_to_bfloat16(float value) {
  std::uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // NaN, quieted
  // Round to nearest even: add just under half a unit of the kept part, plus one when the kept part is odd; a carry
  // out of the mantissa bumps the exponent (the largest finite values round to inf, as IEEE says).
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

float float16_to_float32(std::uint16_t bits) {
  std::uint32_t sign = std::uint32_t(bits & 0x8000u) << 16;
  std::uint32_t exponent = (bits >> 10) & 0x1fu;
  std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return bits_float(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN with its payload
  if (exponent == 0) {
    if (mantissa == 0) return bits_float(sign);  // ±0
    // A subnormal, mantissa * 2^-24: shift its leading one up to the implicit bit of a float32 normal.
    std::uint32_t shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    return bits_float(sign | ((113 - shift) << 23) | ((mantissa & 0x3ffu) << 13));
  }
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

std::uint16_t float32_to_float16(float value) {
  std::uint32_t bits = float_bits(value);
  std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));  // NaN
  if (magnitude >= 0x47800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65536 (and inf): inf
  if (magnitude >= 0x38800000u) {  // >= 2^-14: a float16 normal (or, rounding up from 65520 on, inf)
    std::uint32_t odd = (magnitude >> 13) & 1u;
    magnitude = magnitude - 0x38000000u + 0xfffu + odd;  // rebias the exponent by 127 - 15, round to nearest even
    return static_cast<std::uint16_t>(sign | (magnitude >> 13));
  }
  if (magnitude <= 0x33000000u) return sign;  // <= 2^-25: rounds to ±0 (2^-25 itself is the tie, to even 0)
  // A float16 subnormal: units of 2^-24 out of the 24-bit significand, rounded to nearest even by the bits shifted out.
  std::uint32_t exponent = magnitude >> 23;
  std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  std::uint32_t shift = 126 - exponent;
  std::uint32_t kept = significand >> shift;
  std::uint32_t rest = significand & ((1u << shift) - 1);
  std::uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1u))) ++kept;  // 0x400 on a carry: the smallest normal, as it should
  return static_cast<std::uint16_t>(sign | kept);
}

Tensor::Tensor(DType dtype, std::vector<std::int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  auto nbytes = tensor_nbytes(dtype_, shape_);
  if (!nbytes || *nbytes > std::numeric_limits<std::size_t>::max())
    throw std::invalid_argument("a tensor of shape " + shape_text(shape_) + " and dtype " + dtype_name(dtype_) +
                                " has no byte size (a negative dim, more than 64 dims, or too many elements)");
  bytes_.assign(static_cast<std::size_t>(*nbytes), 0);
}

Tensor::Tensor(DType dtype, std::vector<std::int64_t> shape, Bytes bytes)
    : dtype_(dtype), shape_(std::move(shape)), bytes_(std::move(bytes)) {
  auto nbytes = tensor_nbytes(dtype_, shape_);
  if (!nbytes || *nbytes != bytes_.size())
    throw std::invalid_argument("a tensor of shape " + shape_text(shape_) + " and dtype " + dtype_name(dtype_) +
                                " cannot hold " + std::to_string(bytes_.size()) + " bytes");
}

void Tensor::check_index(std::size_t i) const {
  if (i >= numel())
    throw std::out_of_range("element " + std::to_string(i) + " of a tensor of " + std::to_string(numel()) + " elements");
}

template <typename T>
T Tensor::get(std::size_t i) const {
  if (!stores_dtype<T>(dtype_)) throw std::logic_error(std::string("Tensor::get with the wrong C++ type for dtype ") + dtype_name(dtype_));
  check_index(i);
  if constexpr (std::is_same<T, bool>::value) return bytes_[i] != 0;
  else return load_le<T>(bytes_.data() + i * sizeof(T));
}

template <typename T>
void Tensor::set(std::size_t i, T value) {
  if (!stores_dtype<T>(dtype_)) throw std::logic_error(std::string("Tensor::set with the wrong C++ type for dtype ") + dtype_name(dtype_));
  check_index(i);
  if constexpr (std::is_same<T, bool>::value) bytes_[i] = value ? 1 : 0;
  else store_le<T>(bytes_.data() + i * sizeof(T), value);
}

template bool Tensor::get<bool>(std::size_t) const;
template std::uint8_t Tensor::get<std::uint8_t>(std::size_t) const;
template std::int8_t Tensor::get<std::int8_t>(std::size_t) const;
template std::int16_t Tensor::get<std::int16_t>(std::size_t) const;
template std::uint16_t Tensor::get<std::uint16_t>(std::size_t) const;
template std::int32_t Tensor::get<std::int32_t>(std::size_t) const;
template std::int64_t Tensor::get<std::int64_t>(std::size_t) const;
template float Tensor::get<float>(std::size_t) const;
template double Tensor::get<double>(std::size_t) const;
template void Tensor::set<bool>(std::size_t, bool);
template void Tensor::set<std::uint8_t>(std::size_t, std::uint8_t);
template void Tensor::set<std::int8_t>(std::size_t, std::int8_t);
template void Tensor::set<std::int16_t>(std::size_t, std::int16_t);
template void Tensor::set<std::uint16_t>(std::size_t, std::uint16_t);
template void Tensor::set<std::int32_t>(std::size_t, std::int32_t);
template void Tensor::set<std::int64_t>(std::size_t, std::int64_t);
template void Tensor::set<float>(std::size_t, float);
template void Tensor::set<double>(std::size_t, double);

float Tensor::get_float32(std::size_t i) const {
  switch (dtype_) {
    case DType::Float16: return float16_to_float32(get<std::uint16_t>(i));
    case DType::BFloat16: return bfloat16_to_float32(get<std::uint16_t>(i));
    case DType::Float32: return get<float>(i);
    case DType::Float64: return static_cast<float>(get<double>(i));
    default: throw std::logic_error(std::string("Tensor::get_float32 of a ") + dtype_name(dtype_) + " tensor");
  }
}

void Tensor::set_float32(std::size_t i, float value) {
  switch (dtype_) {
    case DType::Float16: return set<std::uint16_t>(i, float32_to_float16(value));
    case DType::BFloat16: return set<std::uint16_t>(i, float32_to_bfloat16(value));
    case DType::Float32: return set<float>(i, value);
    case DType::Float64: return set<double>(i, value);
    default: throw std::logic_error(std::string("Tensor::set_float32 of a ") + dtype_name(dtype_) + " tensor");
  }
}

double Tensor::get_float64(std::size_t i) const {
  switch (dtype_) {
    case DType::Bool: return get<bool>(i) ? 1.0 : 0.0;
    case DType::UInt8: return get<std::uint8_t>(i);
    case DType::Int8: return get<std::int8_t>(i);
    case DType::Int16: return get<std::int16_t>(i);
    case DType::Int32: return get<std::int32_t>(i);
    case DType::Int64: return static_cast<double>(get<std::int64_t>(i));
    case DType::Float64: return get<double>(i);
    default: return get_float32(i);
  }
}

void Tensor::set_float64(std::size_t i, double value) {
  if (dtype_ == DType::Float64) return set<double>(i, value);
  if (!is_floating(dtype_)) throw std::logic_error(std::string("Tensor::set_float64 of a ") + dtype_name(dtype_) + " tensor");
  set_float32(i, static_cast<float>(value));
}

Tensor Tensor::to(DType dtype) const {
  Tensor out(dtype, shape_);
  std::size_t n = numel();
  if (dtype == DType::Float64) {
    for (std::size_t i = 0; i < n; ++i) out.set<double>(i, get_float64(i));
  } else if (is_floating(dtype_) && dtype_ != DType::Float64) {
    for (std::size_t i = 0; i < n; ++i) out.set_float32(i, get_float32(i));
  } else {
    for (std::size_t i = 0; i < n; ++i) out.set_float64(i, get_float64(i));
  }
  return out;
}

Value tensor_value(Tensor tensor) {
  Value shape = Value::array();
  for (std::int64_t dim : tensor.shape()) shape.push_back(dim);
  Value body = Value::object();
  body["dtype"] = dtype_name(tensor.dtype());
  body["shape"] = std::move(shape);
  body["data"] = Value::binary(std::move(tensor.bytes()), kTensorSubtype);
  return Value::object({{"$tensor", std::move(body)}});
}

bool is_tensor_value(const Value& value) {
  if (!value.is_object() || value.size() != 1 || value.begin().key() != "$tensor") return false;
  const Value& body = value.begin().value();
  auto data = body.is_object() ? body.find("data") : body.end();
  return data != body.end() && data->is_binary() && data->get_binary().has_subtype() &&
         data->get_binary().subtype() == kTensorSubtype;
}

const Bytes& tensor_bytes(const Value& value) { return tensor_body(value).at("data").get_binary(); }

Tensor tensor_of(const Value& value) {
  const Value& body = tensor_body(value);
  auto dtype = dtype_named(body.at("dtype").get<std::string>());
  if (!dtype) throw std::invalid_argument("a tensor of dtype " + body.at("dtype").dump());
  return Tensor(*dtype, body.at("shape").get<std::vector<std::int64_t>>(), tensor_bytes(value));
}

}  // namespace gates
