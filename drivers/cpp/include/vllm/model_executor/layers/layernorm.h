// RMSNorm as vLLM 0.33.0's RMSNorm.forward_native computes it (spec/layers-norm-rope.md NR-1.1 to NR-1.5;
// vllm/ir/ops/layernorm.py rms_norm and fused_add_rms_norm). Behaviour follows the Python port
// impl/model_executor/layers/layernorm.py.
#pragma once

#include <optional>

#include "vllm/model_executor/layers/float_tensor.h"

namespace vllm::layers {

struct RmsNormResult {
  FloatTensor out;                      // x's shape and dtype
  std::optional<FloatTensor> residual;  // with a residual: x + residual in x's dtype (NR-1.4)
};

// Each row of `x` (its last axis) scaled by 1/sqrt(mean(x²) + eps) in float32, cast to the weight's dtype and
// multiplied by `weight` there, cast to x's dtype (NR-1.1..NR-1.3); with `residual`, x + residual summed in float32
// is what is normalized and, cast to x's dtype, the new residual (NR-1.4). `weight` and `residual` may be null.
// Throws std::invalid_argument, worded as the Python port's ValueError (NR-1.5): an x without a last axis or with an
// empty one, a weight that is not (hidden,), a residual that is not x's shape, an eps negative or not finite.
RmsNormResult RmsNorm(const FloatTensor& x, const FloatTensor* weight, double eps, const FloatTensor* residual);

}  // namespace vllm::layers
