// Rotary position embedding as vLLM 0.33.0 computes it (spec/layers-norm-rope.md NR-2.1 to NR-3.6;
// vllm/model_executor/layers/rotary_embedding/base.py RotaryEmbedding, common.py ApplyRotaryEmb.forward_static).
// Behaviour follows the Python port impl/model_executor/layers/rotary_embedding.py.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "vllm/model_executor/layers/float_tensor.h"

namespace vllm::layers {

// The float32 table [max_position, rotary_dim]: row p holds cos(p·inv_freq_j) for every j, then sin(p·inv_freq_j),
// inv_freq_j = 1 / base^(2j / rotary_dim), each step a float32 operation (NR-2.1..NR-2.3). Throws
// std::invalid_argument naming the value for an odd rotary_dim or one below 2, a max_position below 1, a base not
// above 1.
FloatTensor CosSinCache(std::int64_t rotary_dim, std::int64_t max_position, double base);

// `query` and `key` (null: none) of [tokens, heads · head_size] with each head's first rotary_dim elements rotated
// by the cache rows of `positions` (one per token), in the query's dtype: the rows cast to it, each product and sum
// rounded to it (NR-3.1..NR-3.5). Neox pairs i with i + rotary_dim/2, GPT-J 2i with 2i + 1; the rest of each head
// passes through. Throws std::invalid_argument for a rotary_dim above head_size, a position outside the table, a
// tensor whose width is not whole heads for the tokens given (NR-3.6).
std::pair<FloatTensor, std::optional<FloatTensor>> RotaryEmbedding(const std::vector<std::int64_t>& positions,
                                                                   const FloatTensor& query, const FloatTensor* key,
                                                                   std::int64_t head_size, std::int64_t rotary_dim,
                                                                   const FloatTensor& cache, bool neox);

// A rotary embedding built from its configuration and applied once, as vLLM's RotaryEmbedding(head_size,
// rotary_dim, max_position, base, is_neox_style, dtype).forward_native does: the cache's refusals first.
std::pair<FloatTensor, std::optional<FloatTensor>> RopeForward(const std::vector<std::int64_t>& positions,
                                                               const FloatTensor& query, const FloatTensor* key,
                                                               std::int64_t head_size, std::int64_t rotary_dim,
                                                               std::int64_t max_position, double base, bool neox);

}  // namespace vllm::layers
