// RMSNorm; see include/vllm/model_executor/layers/layernorm.h.
#include "vllm/model_executor/layers/layernorm.h"

#include <cmath>
#include <cstddef>

namespace vllm::model_executor {

HostTensor RmsNorm(const HostTensor& x, const HostTensor& weight, double eps) {
  const std::size_t width = weight.data.size();
  HostTensor out = x;
  for (std::size_t begin = 0; begin < out.data.size(); begin += width) {
    double squares = 0.0;
    for (std::size_t i = 0; i < width; ++i) squares += static_cast<double>(x.data[begin + i]) * x.data[begin + i];
    const float scale = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(width) + eps));
    for (std::size_t i = 0; i < width; ++i) out.data[begin + i] = x.data[begin + i] * scale * weight.data[i];
  }
  return out;
}

}  // namespace vllm::model_executor
