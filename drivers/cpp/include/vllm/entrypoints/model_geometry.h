// Per-rank KV geometry of a Hugging Face config.json: the probe KVCacheConfig (MEM-2.10 to MEM-2.12).
//
// Ported from impl/entrypoints/model_geometry.py, which mirrors how vLLM reads a model's KV shape:
// vllm/config/model.py (get_head_size, get_num_kv_heads, layer types), vllm/model_executor/layers/linear.py
// (KV-head replication) and vllm/model_executor/layers/mamba/mamba_utils.py (gated delta-net state shapes).
// (The C++ port reads config.json into vllm::HfConfig, include/vllm/transformers_utils/hf_config.h, and builds its
// KV layout per model in ModelRegistry::MakeKVCache; this is the generic geometry the Python port uses.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vllm/entrypoints/json_repr.h"
#include "vllm/v1/dtypes.h"
#include "vllm/v1/kv_cache_interface.h"

namespace vllm::entrypoints {

// "float16", "bfloat16", "float32".
const std::vector<std::string>& ModelDTypeNames();
// "auto", "bfloat16", ..., "fp8_ds_mla", "int8_per_token_head", "fp8_per_token_head", "nvfp4".
const std::vector<std::string>& KVCacheDTypes();

// A multimodal config's text_config (the top-level dtype kept), else the config itself.
Json TextModelConfig(const Json& raw);
// ReadConfigJson then TextModelConfig.
Json LoadModelConfig(const std::string& path);

// vLLM's ModelConfig.verify_with_parallel_config (vllm/config/model.py): every model, MLA included, refuses a
// tensor-parallel size that does not divide its total number of attention heads (std::invalid_argument).
void CheckHeadsDivisible(const Json& cfg, int64_t tensor_parallel_size);
// DeepSeek-style latent attention: the config carries a kv_lora_rank.
bool IsMla(const Json& cfg);
// K/V head width: MLA's kv_lora_rank + qk_rope_head_dim, else head_dim, else hidden_size / num_attention_heads.
int64_t HeadSize(const Json& cfg);
// KV heads one rank stores: total / tp, or 1 (replicated) when tp >= total; MLA keeps 1 latent head.
// A tp size that does not divide the attention heads is refused first, MLA included (as vLLM).
int64_t KVHeadsPerRank(const Json& cfg, int64_t tensor_parallel_size);
// One of full_attention, sliding_attention, linear_attention per decoder layer.
std::vector<std::string> LayerTypes(const Json& cfg);
// The checkpoint dtype's name, from torch_dtype (or the newer dtype).
std::string ModelDTypeName(const Json& cfg);
// Model types vLLM 0.33.0 never runs in float16 (_FLOAT16_NOT_SUPPORTED_MODELS, vllm/config/model.py).
bool FloatSixteenRefused(const std::string& model_type);
// vLLM's --dtype auto for a checkpoint dtype: a float16 checkpoint of such a type runs in bfloat16 (MEM-2.11).
std::string AutoRunDTypeName(const Json& cfg, const std::string& checkpoint);

// A length as Python computed it: an int, or a float once a rope factor scaled it.
struct ModelLength {
  std::string key;
  bool is_float = false;
  int64_t int_value = 0;
  double float_value = 0.0;
  double value() const { return is_float ? float_value : static_cast<double>(int_value); }
  int64_t truncated() const;  // int(length)
  std::string repr() const;   // as Python prints it
};
// vLLM's longest sequence for a config: the least of its length keys, model_max_length first, scaled by RoPE;
// std::nullopt when the config has none of the length keys.
std::optional<ModelLength> DerivedMaxModelLen(const Json& cfg);

// What a probe is built for: ranks, dtypes and block size. dtype is an explicit --dtype; std::nullopt is --dtype auto
// (the config's, as vLLM runs it).
struct ProbeRequest {
  int64_t tensor_parallel_size = 1;
  std::optional<vllm::v1::DType> dtype;
  std::string kv_cache_dtype = "auto";
  int64_t block_size = 32;

  void Validate() const;
};

// The KV layout one rank of this model needs, grouped by equal spec (one group per layer kind, in order of first
// appearance), with no tensors allocated. Throws std::invalid_argument worded as the Python port.
vllm::v1::KVCacheConfig ProbeKVCacheConfig(const Json& cfg, const ProbeRequest& request, int64_t num_blocks = 0);

}  // namespace vllm::entrypoints
