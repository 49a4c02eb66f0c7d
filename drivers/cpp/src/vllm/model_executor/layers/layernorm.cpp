// RMSNorm (spec/layers-norm-rope.md NR-1.1 to NR-1.5); see include/vllm/model_executor/layers/layernorm.h.
#include "vllm/model_executor/layers/layernorm.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "vllm/v1/float_repr.h"

namespace vllm::layers {
namespace {

// The refusals of NR-1.5, in the Python port's order and words.
void Check(const FloatTensor& x, const FloatTensor* weight, double eps, const FloatTensor* residual) {
  if (x.shape.empty() || x.shape.back() < 1)
    throw std::invalid_argument("rms_norm: x has shape " + ShapeText(x.shape) +
                                "; its last axis (hidden) must hold at least one element");
  const std::vector<std::int64_t> hidden_only = {x.shape.back()};
  if (weight != nullptr && weight->shape != hidden_only)
    throw std::invalid_argument("rms_norm: weight has shape " + ShapeText(weight->shape) + ", expected " +
                                ShapeText(hidden_only) + " (x's hidden size)");
  if (residual != nullptr && residual->shape != x.shape)
    throw std::invalid_argument("rms_norm: residual has shape " + ShapeText(residual->shape) + ", expected x's " +
                                ShapeText(x.shape));
  if (!(eps >= 0.0 && std::isfinite(eps)))
    throw std::invalid_argument("rms_norm: eps=" + vllm::v1::PyFloatRepr(eps) + " must be a finite number >= 0");
}

// mean(row²) as a float32 (NR-1.2): the float32 values squared exactly and summed in double, rounded to float32
// once. vLLM's torch sums float32 squares in float32, in an order of its own; both are float32 statistics whose
// last bit may differ (the tolerance the rms-norm gates argue).
float MeanSquare(const float* row, std::int64_t hidden) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < hidden; ++i) sum += static_cast<double>(row[i]) * static_cast<double>(row[i]);
  return static_cast<float>(sum / static_cast<double>(hidden));
}

}  // namespace

RmsNormResult RmsNorm(const FloatTensor& x, const FloatTensor* weight, double eps, const FloatTensor* residual) {
  Check(x, weight, eps, residual);
  const std::int64_t hidden = x.shape.back();
  const std::int64_t rows = x.Numel() / hidden;
  RmsNormResult result;
  result.out = FloatTensor{x.dtype, x.shape, std::vector<float>(x.values.size())};
  std::vector<float> wide(x.values);  // x in float32 (NR-1.2)
  if (residual != nullptr) {
    FloatTensor sum{x.dtype, x.shape, std::vector<float>(x.values.size())};
    for (std::size_t i = 0; i < wide.size(); ++i) {
      wide[i] = x.values[i] + residual->values[i];  // the float32 sum is normalized (NR-1.4)
      sum.values[i] = RoundTo(x.dtype, wide[i]);    // its copy in x's dtype is the new residual
    }
    result.residual = std::move(sum);
  }
  const float eps32 = static_cast<float>(eps);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = wide.data() + r * hidden;
    const float shifted = MeanSquare(row, hidden) + eps32;  // eps inside the square root (NR-1.1)
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shifted)));
    for (std::int64_t i = 0; i < hidden; ++i) {
      float normed = row[i] * scale;
      if (weight != nullptr)  // cast to the weight's dtype, multiplied there (NR-1.3)
        normed = RoundTo(weight->dtype, RoundTo(weight->dtype, normed) * weight->values[i]);
      result.out.values[r * hidden + i] = RoundTo(x.dtype, normed);
    }
  }
  return result;
}

}  // namespace vllm::layers
