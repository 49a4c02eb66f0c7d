// Neox rotary embedding; see include/vllm/model_executor/layers/rotary_embedding.h.
#include "vllm/model_executor/layers/rotary_embedding.h"

#include <cmath>
#include <cstddef>
#include <vector>

namespace vllm::model_executor {

HostTensor NeoxRope(const HostTensor& x, int head_dim, double theta) {
  const std::size_t half = static_cast<std::size_t>(head_dim / 2);
  std::vector<float> inv_freq(half);
  for (std::size_t i = 0; i < half; ++i)
    inv_freq[i] = 1.0f / std::pow(static_cast<float>(theta), static_cast<float>(2 * i) / static_cast<float>(head_dim));
  const std::size_t tokens = static_cast<std::size_t>(x.shape[0]);
  const std::size_t width = static_cast<std::size_t>(x.shape[1]);
  HostTensor out = x;
  for (std::size_t t = 0; t < tokens; ++t)
    for (std::size_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(t) * inv_freq[i];
      const float cos = std::cos(angle);
      const float sin = std::sin(angle);
      for (std::size_t head = t * width; head < (t + 1) * width; head += static_cast<std::size_t>(head_dim)) {
        const float a = x.data[head + i];
        const float b = x.data[head + i + half];
        out.data[head + i] = a * cos - b * sin;
        out.data[head + i + half] = b * cos + a * sin;
      }
    }
  return out;
}

}  // namespace vllm::model_executor
