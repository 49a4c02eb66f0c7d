// RMSNorm on float32 (vLLM 0.33.0 vllm/model_executor/layers/layernorm.py RMSNorm.forward_native): each group of
// `weight`'s width consecutive elements (a token's hidden vector, or one head of it for Qwen3's q_norm/k_norm)
// scaled by the reciprocal root of its mean square plus eps, times the weight.
#pragma once

#include "vllm/distributed/tensor_parallel.h"

namespace vllm::model_executor {

// x's elements in groups of weight.shape[0] (x's size a multiple of it, the caller checked), normalized.
HostTensor RmsNorm(const HostTensor& x, const HostTensor& weight, double eps);

}  // namespace vllm::model_executor
