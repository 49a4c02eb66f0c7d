// Rotary position embedding, neox pairing, on float32 (vLLM 0.33.0 vllm/model_executor/layers/rotary_embedding
// RotaryEmbedding with is_neox_style): element i of a head pairs with i + head_dim/2, rotated by position · θ^(-2i/D),
// the frequencies and angles in float32 as vLLM's cos/sin cache computes them.
#pragma once

#include "vllm/distributed/tensor_parallel.h"

namespace vllm::model_executor {

// x [tokens, heads·head_dim] with token t at position t, rotated over the whole head (rotary_dim = head_dim, even).
HostTensor NeoxRope(const HostTensor& x, int head_dim, double theta);

}  // namespace vllm::model_executor
