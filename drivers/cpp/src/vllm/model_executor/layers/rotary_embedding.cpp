// Rotary position embedding (spec/layers-norm-rope.md NR-2.1 to NR-3.6); see
// include/vllm/model_executor/layers/rotary_embedding.h.
#include "vllm/model_executor/layers/rotary_embedding.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "vllm/v1/float_repr.h"

namespace vllm::layers {
namespace {

// x [tokens, heads · head_size] with each head's pairs turned by its token's rows of `table` (cos half, then sin
// half, in the query's dtype, cast to x's), in x's dtype: (a, b) -> (a·cos − b·sin, b·cos + a·sin), each product and each sum
// rounded (NR-3.2, NR-3.3).
FloatTensor RotateHeads(const FloatTensor& x, const std::vector<float>& table, std::int64_t tokens,
                        std::int64_t head_size, std::int64_t rotary_dim, bool neox) {
  const std::int64_t width = x.shape.empty() ? 1 : x.shape.back();
  if (x.shape.empty() || width % head_size != 0 || x.Numel() != tokens * width)
    throw std::invalid_argument("a tensor of shape " + ShapeText(x.shape) + " is not [" + std::to_string(tokens) +
                                " tokens, heads * head_size=" + std::to_string(head_size) + "]");
  FloatTensor out = x;
  const std::int64_t half = rotary_dim / 2;
  const std::int64_t heads = width / head_size;
  auto round = [&](float value) { return RoundTo(x.dtype, value); };
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float* cos = table.data() + t * rotary_dim;
    const float* sin = cos + half;
    for (std::int64_t h = 0; h < heads; ++h) {
      float* head = out.values.data() + t * width + h * head_size;
      const float* source = x.values.data() + t * width + h * head_size;
      for (std::int64_t i = 0; i < half; ++i) {
        const std::int64_t at_a = neox ? i : 2 * i, at_b = neox ? i + half : 2 * i + 1;
        const float a = source[at_a], b = source[at_b], c = round(cos[i]), s = round(sin[i]);
        head[at_a] = round(round(a * c) - round(b * s));
        head[at_b] = round(round(b * c) + round(a * s));
      }
    }
  }
  return out;
}

}  // namespace

FloatTensor CosSinCache(std::int64_t rotary_dim, std::int64_t max_position, double base) {
  if (rotary_dim < 2 || rotary_dim % 2 != 0)
    throw std::invalid_argument("rotary_dim=" + std::to_string(rotary_dim) + " must be an even number >= 2");
  if (max_position < 1) throw std::invalid_argument("max_position=" + std::to_string(max_position) + " must be >= 1");
  if (!(base > 1.0)) throw std::invalid_argument("base=" + vllm::v1::PyFloatRepr(base) + " must be a number > 1");
  const std::int64_t half = rotary_dim / 2;
  std::vector<float> inv_freq(static_cast<std::size_t>(half));
  const float base32 = static_cast<float>(base);
  for (std::int64_t j = 0; j < half; ++j) {
    const float exponent = static_cast<float>(2 * j) / static_cast<float>(rotary_dim);
    inv_freq[j] = 1.0f / std::pow(base32, exponent);  // float32 pow: its last bit is the platform's (NR-2.3)
  }
  FloatTensor cache{FloatType::kFloat32, {max_position, rotary_dim}, {}};
  cache.values.resize(static_cast<std::size_t>(max_position * rotary_dim));
  for (std::int64_t p = 0; p < max_position; ++p) {
    float* row = cache.values.data() + p * rotary_dim;
    for (std::int64_t j = 0; j < half; ++j) {
      const float angle = static_cast<float>(p) * inv_freq[j];
      row[j] = std::cos(angle);
      row[half + j] = std::sin(angle);
    }
  }
  return cache;
}

std::pair<FloatTensor, std::optional<FloatTensor>> RotaryEmbedding(const std::vector<std::int64_t>& positions,
                                                                   const FloatTensor& query, const FloatTensor* key,
                                                                   std::int64_t head_size, std::int64_t rotary_dim,
                                                                   const FloatTensor& cache, bool neox) {
  if (rotary_dim > head_size)
    throw std::invalid_argument("rotary_dim=" + std::to_string(rotary_dim) + " must be <= head_size=" +
                                std::to_string(head_size));
  const std::int64_t rows = cache.shape.at(0);
  if (!positions.empty()) {
    const auto [low, high] = std::minmax_element(positions.begin(), positions.end());
    if (*low < 0 || *high >= rows)
      throw std::invalid_argument("positions must lie in [0, max_position=" + std::to_string(rows) + "); got " +
                                  std::to_string(*low) + ".." + std::to_string(*high));
  }
  const auto tokens = static_cast<std::int64_t>(positions.size());
  std::vector<float> table(static_cast<std::size_t>(tokens * rotary_dim));  // the rows of the positions, in query's dtype
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t k = 0; k < rotary_dim; ++k)
      table[t * rotary_dim + k] = RoundTo(query.dtype, cache.values[positions[t] * rotary_dim + k]);
  FloatTensor rotated_query = RotateHeads(query, table, tokens, head_size, rotary_dim, neox);
  std::optional<FloatTensor> rotated_key;
  if (key != nullptr) rotated_key = RotateHeads(*key, table, tokens, head_size, rotary_dim, neox);
  return {std::move(rotated_query), std::move(rotated_key)};
}

std::pair<FloatTensor, std::optional<FloatTensor>> RopeForward(const std::vector<std::int64_t>& positions,
                                                               const FloatTensor& query, const FloatTensor* key,
                                                               std::int64_t head_size, std::int64_t rotary_dim,
                                                               std::int64_t max_position, double base, bool neox) {
  return RotaryEmbedding(positions, query, key, head_size, rotary_dim, CosSinCache(rotary_dim, max_position, base),
                         neox);
}

}  // namespace vllm::layers
