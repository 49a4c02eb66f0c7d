// Rounding to float16 and bfloat16 and shape text; see include/vllm/model_executor/layers/float_tensor.h.
#include "vllm/model_executor/layers/float_tensor.h"

#include <cmath>
#include <cstring>

namespace vllm::layers {
namespace {

std::uint32_t Bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float FromBits(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// bfloat16 is the top half of a float32: round the low 16 bits away, ties to even.
float RoundToBFloat16(float value) {
  if (std::isnan(value)) return value;
  const std::uint32_t bits = Bits(value);
  const std::uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return FromBits(rounded & 0xFFFF0000u);
}

// float16: 11 significant bits, exponents down to 2^-14 (subnormals in steps of 2^-24), largest finite 65504.
float RoundToFloat16(float value) {
  if (!std::isfinite(value)) return value;
  const float magnitude = std::fabs(value);
  if (magnitude >= 65520.0f) return std::copysign(INFINITY, value);  // halfway past 65504 rounds to inf
  int exponent = 0;
  std::frexp(magnitude, &exponent);  // magnitude in [2^(exponent-1), 2^exponent)
  const int step_exponent = (exponent - 1 < -14 ? -14 : exponent - 1) - 10;  // the spacing of float16 there
  const float step = std::ldexp(1.0f, step_exponent);
  // magnitude / step is exact (a power of two), nearbyint rounds ties to even in the default rounding mode
  return std::copysign(std::nearbyint(magnitude / step) * step, value);
}

}  // namespace

const char* FloatTypeName(FloatType type) {
  switch (type) {
    case FloatType::kFloat32: return "float32";
    case FloatType::kFloat16: return "float16";
    case FloatType::kBFloat16: return "bfloat16";
  }
  return "float32";
}

float RoundTo(FloatType type, float value) {
  switch (type) {
    case FloatType::kFloat32: return value;
    case FloatType::kFloat16: return RoundToFloat16(value);
    case FloatType::kBFloat16: return RoundToBFloat16(value);
  }
  return value;
}

std::string ShapeText(const std::vector<std::int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

std::int64_t FloatTensor::Numel() const {
  std::int64_t count = 1;
  for (std::int64_t dim : shape) count *= dim;
  return count;
}

}  // namespace vllm::layers
