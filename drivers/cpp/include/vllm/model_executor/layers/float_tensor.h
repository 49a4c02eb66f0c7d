// The floating tensors RMSNorm and RoPE compute on (LAYERS-NORM-ROPE, spec/layers-norm-rope.md): a dtype of the three
// vLLM runs these layers in, a shape, and the elements as float32 values (float16 and bfloat16 values are exact in
// float32), row-major. RoundTo is the one rounding a float32 result takes into a narrower dtype, as torch's CPU
// arithmetic in float16/bfloat16 rounds the float32 result of each operation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vllm::layers {

enum class FloatType { kFloat32, kFloat16, kBFloat16 };

// "float32", "float16", "bfloat16".
const char* FloatTypeName(FloatType type);

// `value` rounded to the nearest value of `type`, ties to even; past the largest finite value it is inf, a NaN stays
// a NaN, subnormals are kept. kFloat32 returns `value`.
float RoundTo(FloatType type, float value);

// A shape as Python writes a tuple: "()", "(7,)", "(2, 8)".
std::string ShapeText(const std::vector<std::int64_t>& shape);

struct FloatTensor {
  FloatType dtype = FloatType::kFloat32;
  std::vector<std::int64_t> shape;
  std::vector<float> values;  // each a value of dtype

  // The product of the dims (1 for a 0-d tensor).
  std::int64_t Numel() const;
};

}  // namespace vllm::layers
