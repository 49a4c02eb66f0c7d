// See include/vllm/entrypoints/model_geometry.h. Messages as impl/entrypoints/model_geometry.py.
#include "vllm/entrypoints/model_geometry.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "vllm/entrypoints/config_file.h"
#include "vllm/v1/field_checks.h"
#include "vllm/v1/float_repr.h"
#include "vllm/v1/str_repr.h"

namespace vllm::entrypoints {

using vllm::v1::DType;
using vllm::v1::KVQuantMode;

const std::vector<std::string>& ModelDTypeNames() {
  static const std::vector<std::string> names = {"float16", "bfloat16", "float32"};
  return names;
}

const std::vector<std::string>& KVCacheDTypes() {
  // "float32" is not a --kv-cache-dtype (vLLM 0.33.0's KV_CACHE_DTYPES, vllm/config/cache.py).
  static const std::vector<std::string> names = {"auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2",
                                                 "fp8_ds_mla", "int8_per_token_head", "fp8_per_token_head", "nvfp4"};
  return names;
}

namespace {

const std::vector<std::string>& LayerTypeNames() {
  static const std::vector<std::string> names = {"full_attention", "sliding_attention", "linear_attention"};
  return names;
}

std::string PyStrList(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + vllm::v1::PyStrRepr(names[i]);
  return out + "]";
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A config field KV sizing needs: present, an int (not a bool), >= minimum.
int64_t Field(const Json& cfg, const std::string& name, int64_t minimum = 1) {
  const Json* value = JsonGet(cfg, name);
  if (value == nullptr) throw std::invalid_argument("config.json has no '" + name + "', which KV sizing needs");
  int64_t v = 0;
  const JsonIntKind kind = value->is_boolean() ? JsonIntKind::kNot : JsonInt(*value, &v);
  if (kind == JsonIntKind::kNot) {
    throw std::invalid_argument("config.json." + name + " must be an int >= " + std::to_string(minimum) + ", got " +
                                PyJsonRepr(*value) + " (" + PyJsonTypeName(*value) + ")");
  }
  if (kind == JsonIntKind::kBig) {
    throw std::overflow_error("config.json." + name + "=" + PyJsonRepr(*value) + " does not fit in an int64_t");
  }
  return vllm::v1::CheckInt("config.json", name, v, minimum);
}

int64_t Divide(int64_t total, int64_t tp, const std::string& what) {
  if (total % tp) {
    throw std::invalid_argument(what + " (" + std::to_string(total) + ") must be divisible by tensor parallel size (" +
                                std::to_string(tp) + ")");
  }
  return total / tp;
}

std::string ModelType(const Json& cfg) {
  const Json* value = JsonGet(cfg, "model_type");
  return value != nullptr && value->is_string() ? value->get<std::string>() : "";
}

}  // namespace

Json TextModelConfig(const Json& raw) {
  const Json* text = JsonGet(raw, "text_config");
  if (text != nullptr && text->is_object()) {
    Json merged = *text;
    for (const char* key : {"torch_dtype", "dtype"}) {
      if (!merged.contains(key) && raw.contains(key)) merged[key] = raw[key];
    }
    return merged;
  }
  return raw;
}

Json LoadModelConfig(const std::string& path) { return TextModelConfig(ReadConfigJson(path)); }

void CheckHeadsDivisible(const Json& cfg, int64_t tensor_parallel_size) {
  const int64_t tp = vllm::v1::CheckInt("probe", "tensor_parallel_size", tensor_parallel_size, 1);
  const int64_t heads = Field(cfg, "num_attention_heads");
  if (heads % tp) {
    throw std::invalid_argument("Total number of attention heads (" + std::to_string(heads) +
                                ") must be divisible by tensor parallel size (" + std::to_string(tp) +
                                "); choose a --tensor-parallel-size that divides " + std::to_string(heads));
  }
}

bool IsMla(const Json& cfg) { return JsonGet(cfg, "kv_lora_rank") != nullptr; }

// A number of a config (not a bool), else fallback: impl/entrypoints/model_geometry.py _factor.
double Factor(const Json* value, double fallback) {
  return value != nullptr && value->is_number() ? value->get<double>() : fallback;
}

// partial_rotary_factor of each RoPE table, as transformers standardizes them (MEM-2.10): rope_parameters (or
// rope_scaling; one table per layer type when nested), each defaulting to the top-level key, then to the type's
// default (Qwen3-Next 0.25), then 1.0.
std::vector<double> RotaryFactors(const Json& cfg) {
  const double top = Factor(JsonGet(cfg, "partial_rotary_factor"), ModelType(cfg) == "qwen3_next" ? 0.25 : 1.0);
  const Json* rope = JsonGet(cfg, "rope_parameters");
  if (rope == nullptr || !rope->is_object()) rope = JsonGet(cfg, "rope_scaling");
  if (rope == nullptr || !rope->is_object()) return {top};
  std::vector<double> factors;
  for (const auto& item : rope->items()) {
    if (item.value().is_object()) factors.push_back(Factor(JsonGet(item.value(), "partial_rotary_factor"), top));
  }
  if (factors.empty()) factors.push_back(Factor(JsonGet(*rope, "partial_rotary_factor"), top));
  return factors;
}

// width when RoPE can rotate it: an odd width above 4 that a table rotates whole is refused, as vLLM 0.33.0 refuses
// it reading the config (transformers' validate_rope).
int64_t CheckRotaryWidth(const Json& cfg, int64_t width, const std::string& what) {
  if (width < 5 || width % 2 == 0) return width;
  for (double factor : RotaryFactors(cfg)) {
    if (static_cast<int64_t>(static_cast<double>(width) * factor) == width) {
      throw std::invalid_argument(what + " (" + std::to_string(width) + ") is odd, but RoPE rotates this head whole "
                                  "(partial_rotary_factor " + vllm::v1::PyFloatRepr(factor) + ") and rotates pairs of "
                                  "dimensions: vLLM refuses an odd rotated width above 4");
    }
  }
  return width;
}

int64_t DefaultHeadDim(const std::string& model_type) {
  if (model_type == "gemma2" || model_type == "gemma3_text" || model_type == "qwen3_next") return 256;
  if (model_type == "qwen3") return 128;
  return 0;
}

int64_t HeadSize(const Json& cfg) {
  if (IsMla(cfg)) {
    const int64_t rope = CheckRotaryWidth(cfg, Field(cfg, "qk_rope_head_dim"), "qk_rope_head_dim");
    return Field(cfg, "kv_lora_rank") + rope;
  }
  const std::string model_type = ModelType(cfg);
  const bool present = cfg.is_object() && cfg.contains("head_dim");
  if (present && cfg["head_dim"].is_null() && DefaultHeadDim(model_type) != 0) {
    throw std::invalid_argument("config.json head_dim is null, but a " + model_type + " config needs an int head_dim "
                                "(omit it for the type's default, " + std::to_string(DefaultHeadDim(model_type)) + ")");
  }
  const Json* head_dim = JsonGet(cfg, "head_dim");
  int64_t given = -1;
  const bool zero = head_dim != nullptr && !head_dim->is_boolean() && JsonInt(*head_dim, &given) == JsonIntKind::kFits &&
                    given == 0;
  if (head_dim != nullptr && !zero) return CheckRotaryWidth(cfg, Field(cfg, "head_dim"), "head_dim");
  // head_dim 0 or null is unset (vLLM's get_head_size): hidden / heads. Absent: the config class's default (MEM-2.10).
  if (!present && DefaultHeadDim(model_type) != 0) return DefaultHeadDim(model_type);
  const int64_t hidden = Field(cfg, "hidden_size");
  const int64_t heads = Field(cfg, "num_attention_heads");
  if (hidden % heads) {
    throw std::invalid_argument("hidden_size (" + std::to_string(hidden) + ") is not a multiple of " +
                                "num_attention_heads (" + std::to_string(heads) + ")");
  }
  return CheckRotaryWidth(cfg, hidden / heads, "head_dim from hidden_size / num_attention_heads");
}

int64_t KVHeadsPerRank(const Json& cfg, int64_t tensor_parallel_size) {
  const int64_t tp = vllm::v1::CheckInt("probe", "tensor_parallel_size", tensor_parallel_size, 1);
  CheckHeadsDivisible(cfg, tp);
  if (IsMla(cfg)) return 1;
  const int64_t heads = Field(cfg, "num_attention_heads");
  const int64_t total_kv = JsonGet(cfg, "num_key_value_heads") != nullptr ? Field(cfg, "num_key_value_heads") : heads;
  if (heads % total_kv) {
    throw std::invalid_argument("num_attention_heads (" + std::to_string(heads) +
                                ") must be a multiple of num_key_value_heads (" + std::to_string(total_kv) + ")");
  }
  if (tp >= total_kv) {
    if (tp % total_kv) {
      throw std::invalid_argument("tensor parallel size (" + std::to_string(tp) +
                                  ") must be a multiple of num_key_value_heads (" + std::to_string(total_kv) +
                                  ") to replicate the KV heads");
    }
    return 1;
  }
  return Divide(total_kv, tp, "num_key_value_heads");
}

std::vector<std::string> LayerTypes(const Json& cfg) {
  const int64_t n = Field(cfg, "num_hidden_layers");
  if (const Json* types = JsonGet(cfg, "layer_types")) {
    bool ok = types->is_array() && static_cast<int64_t>(types->size()) == n;
    if (ok) {
      for (const Json& t : *types) ok = ok && t.is_string() && Contains(LayerTypeNames(), t.get<std::string>());
    }
    if (!ok) {
      throw std::invalid_argument("layer_types must list " + std::to_string(n) + " entries from " +
                                  PyStrList(LayerTypeNames()) + ", got " + PyJsonRepr(*types));
    }
    return types->get<std::vector<std::string>>();
  }
  const std::string model_type = ModelType(cfg);
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(n));
  if (JsonGet(cfg, "full_attention_interval") != nullptr) {  // Qwen3-Next: every k-th layer is full attention
    const int64_t k = Field(cfg, "full_attention_interval");
    for (int64_t i = 0; i < n; ++i) out.push_back((i + 1) % k == 0 ? "full_attention" : "linear_attention");
    return out;
  }
  const bool no_window = JsonGet(cfg, "sliding_window") == nullptr ||
                         (cfg.contains("use_sliding_window") && cfg["use_sliding_window"].is_boolean() &&
                          !cfg["use_sliding_window"].get<bool>());
  if (no_window) return std::vector<std::string>(static_cast<size_t>(n), "full_attention");
  if (model_type == "gemma2") {  // even layers slide, odd layers are global
    for (int64_t i = 0; i < n; ++i) out.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
    return out;
  }
  if (model_type == "gemma3" || model_type == "gemma3_text") {  // every k-th layer is global
    const int64_t k = Field(cfg, "sliding_window_pattern");
    for (int64_t i = 0; i < n; ++i) out.push_back((i + 1) % k == 0 ? "full_attention" : "sliding_attention");
    return out;
  }
  // A window without layer_types (Llama, Mistral): vLLM 0.33.0 applies it to no layer (MEM-2.11).
  return std::vector<std::string>(static_cast<size_t>(n), "full_attention");
}

std::string ModelDTypeName(const Json& cfg) {
  const Json null_value;
  const Json& name = cfg.contains("torch_dtype") ? cfg["torch_dtype"] : cfg.contains("dtype") ? cfg["dtype"] : null_value;
  if (!name.is_string() || !Contains(ModelDTypeNames(), name.get<std::string>())) {
    throw std::invalid_argument("config.json torch_dtype must be one of " + PyStrList(ModelDTypeNames()) + ", got " +
                                PyJsonRepr(name));
  }
  return name.get<std::string>();
}

int64_t ModelLength::truncated() const {
  return is_float ? static_cast<int64_t>(std::trunc(float_value)) : int_value;
}

std::string ModelLength::repr() const {
  return is_float ? vllm::v1::PyFloatRepr(float_value) : std::to_string(int_value);
}

std::optional<ModelLength> DerivedMaxModelLen(const Json& cfg) {
  std::optional<ModelLength> best;
  auto length_of = [](const std::string& key, const Json& value) {
    ModelLength length;
    length.key = key;
    int64_t v = 0;
    if (!value.is_boolean() && JsonInt(value, &v) == JsonIntKind::kFits) {
      length.int_value = v;
    } else if (value.is_number()) {
      length.is_float = true;
      length.float_value = value.get<double>();
    } else {
      throw std::invalid_argument("config.json." + key + " must be a number, got " + PyJsonRepr(value));
    }
    return length;
  };
  for (const std::string& key : MaxLengthKeys()) {
    const Json* value = JsonGet(cfg, key);
    if (value == nullptr) continue;
    ModelLength candidate = length_of(key, *value);
    if (!best.has_value() || candidate.value() < best->value()) best = candidate;  // the first key with the least
  }
  if (!best.has_value()) return std::nullopt;
  if (const Json* mml = JsonGet(cfg, "model_max_length")) {
    const bool truthy = !(mml->is_number() && mml->get<double>() == 0) && !(mml->is_boolean() && !mml->get<bool>()) &&
                        !(mml->is_string() && mml->get<std::string>().empty());
    if (truthy) best = length_of("model_max_length", *mml);
  }
  const Json* rope = JsonGet(cfg, "rope_scaling");
  if (rope != nullptr && rope->is_object() && ModelType(cfg).find("gemma3") == std::string::npos) {
    const Json* kind = rope->contains("rope_type") ? &(*rope)["rope_type"] : rope->contains("type") ? &(*rope)["type"] : nullptr;
    const std::string kind_name = kind != nullptr && kind->is_string() ? kind->get<std::string>() : "";
    // vLLM 0.33.0 applies no factor where max_position_embeddings is kept already scaled (_get_and_verify_max_len).
    const bool kept = kind != nullptr && kind->is_string() &&
                      (kind_name == "su" || kind_name == "longrope" || kind_name == "llama3" || kind_name == "yarn" ||
                       kind_name == "deepseek_yarn" || kind_name == "deepseek_llama_scaling");
    if (!kept) {
      if (rope->contains("factor")) {
        const Json& factor = (*rope)["factor"];
        int64_t f = 0;
        if (!best->is_float && !factor.is_boolean() && JsonInt(factor, &f) == JsonIntKind::kFits) {
          best->int_value *= f;
        } else {
          best->float_value = best->value() * factor.get<double>();
          best->is_float = true;
        }
      } else {  // length *= 1.0
        best->float_value = best->value();
        best->is_float = true;
      }
    }
  }
  return best;
}

void ProbeRequest::Validate() const {
  vllm::v1::CheckInt("ProbeRequest", "tensor_parallel_size", tensor_parallel_size, 1);
  vllm::v1::CheckInt("ProbeRequest", "block_size", block_size, 1);
  if (dtype.has_value() && !Contains(ModelDTypeNames(), dtype->name)) {
    throw std::invalid_argument("ProbeRequest.dtype must be one of " + PyStrList(ModelDTypeNames()) +
                                " or None, got " + dtype->torch_str());
  }
  if (!Contains(KVCacheDTypes(), kv_cache_dtype)) {
    throw std::invalid_argument("ProbeRequest.kv_cache_dtype must be one of " + PyStrList(KVCacheDTypes()) +
                                ", got " + vllm::v1::PyStrRepr(kv_cache_dtype));
  }
}

namespace {

// The KV cache's element dtype and quantization mode.
std::pair<DType, KVQuantMode> KVStorage(const ProbeRequest& request, const DType& model) {
  const std::string& name = request.kv_cache_dtype;
  if (name == "auto") return {model, KVQuantMode::kNone};
  if (Contains(ModelDTypeNames(), name)) {
    // vllm/config/vllm.py _reject_mismatched_float_kv_cache (MEM-2.11)
    if (name != model.name) {
      throw std::invalid_argument("kv_cache_dtype=\"" + name + "\" is incompatible with dtype=\"" + model.name +
                                  "\": a float KV cache dtype must be the model dtype; set --kv-cache-dtype to auto");
    }
    return {vllm::v1::DTypeByName(name), KVQuantMode::kNone};
  }
  const DType one_byte = vllm::v1::DTypeByName(name == "int8_per_token_head" ? "int8" : "uint8");
  return {one_byte, vllm::v1::kv_quant_mode_for(name)};
}

std::shared_ptr<vllm::v1::KVCacheSpec> AttentionSpecFor(const Json& cfg, const std::string& kind,
                                                        const ProbeRequest& request, const DType& model) {
  const auto [kv_dtype, mode] = KVStorage(request, model);
  const int64_t num_kv_heads = KVHeadsPerRank(cfg, request.tensor_parallel_size);
  const int64_t head_size = HeadSize(cfg);
  if (IsMla(cfg)) {
    if (kind != "full_attention") throw std::invalid_argument("MLA with " + kind + " layers is not modelled");
    if (mode != KVQuantMode::kNone && mode != KVQuantMode::kFp8PerTensor) {
      throw std::invalid_argument("kv_cache_dtype " + vllm::v1::PyStrRepr(request.kv_cache_dtype) +
                                  " is not supported with MLA");
    }
    std::optional<std::string> cache_str;
    if (request.kv_cache_dtype != "auto") cache_str = request.kv_cache_dtype;
    return vllm::v1::MakeSpec<vllm::v1::MLAAttentionSpec>(request.block_size, head_size, kv_dtype, num_kv_heads, mode,
                                                          std::nullopt, cache_str);
  }
  if (request.kv_cache_dtype == vllm::v1::kFp8DsMla) {
    throw std::invalid_argument("kv_cache_dtype 'fp8_ds_mla' needs an MLA model (kv_lora_rank)");
  }
  if (kind == "sliding_attention") {
    const int64_t window = Field(cfg, "sliding_window");
    return vllm::v1::MakeSpec<vllm::v1::SlidingWindowSpec>(request.block_size, num_kv_heads, head_size, kv_dtype,
                                                           window, mode);
  }
  return vllm::v1::MakeSpec<vllm::v1::FullAttentionSpec>(request.block_size, num_kv_heads, head_size, kv_dtype,
                                                         std::nullopt, mode);
}

// Gated delta-net state of one rank: a causal-conv window and a per-head K x V recurrent state.
std::shared_ptr<vllm::v1::KVCacheSpec> GdnSpec(const Json& cfg, const ProbeRequest& request, const DType& model) {
  const int64_t tp = request.tensor_parallel_size;
  const int64_t k_heads = Field(cfg, "linear_num_key_heads");
  const int64_t v_heads = Field(cfg, "linear_num_value_heads");
  const int64_t k_dim = Field(cfg, "linear_key_head_dim");
  const int64_t v_dim = Field(cfg, "linear_value_head_dim");
  const int64_t kernel = Field(cfg, "linear_conv_kernel_dim");
  const int64_t conv_channels = Divide(2 * k_heads * k_dim + v_heads * v_dim, tp, "linear attention conv channels");
  std::vector<std::vector<int64_t>> shapes = {{kernel - 1, conv_channels},
                                              {Divide(v_heads, tp, "linear_num_value_heads"), k_dim, v_dim}};
  return vllm::v1::MakeSpec<vllm::v1::MambaSpec>(request.block_size, shapes, std::vector<DType>{model, model},
                                                 std::nullopt, "none", 0, "gdn_attention");
}

std::string LayerName(int64_t index, const std::string& kind) {
  return kind == "linear_attention" ? "model.layers." + std::to_string(index) + ".linear_attn"
                                    : "model.layers." + std::to_string(index) + ".self_attn.attn";
}

}  // namespace

bool FloatSixteenRefused(const std::string& model_type) {
  return model_type == "gemma2" || model_type == "gemma3" || model_type == "gemma3_text" || model_type == "glm4";
}

std::string AutoRunDTypeName(const Json& cfg, const std::string& checkpoint) {
  return checkpoint == "float16" && FloatSixteenRefused(ModelType(cfg)) ? "bfloat16" : checkpoint;
}

// The dtype the model runs in: a float16 checkpoint of a type vLLM never runs in float16 runs in bfloat16, and
// float16 asked for such a type is refused with vLLM's message (vllm/config/model.py _check_valid_dtype).
static DType RunDType(const Json& cfg, const std::optional<DType>& requested) {
  // requested: an explicit --dtype (kv-plan resolves auto with AutoRunDTypeName first); nullopt: --dtype auto.
  const std::string model_type = ModelType(cfg);
  if (requested.has_value()) {
    if (requested->name == "float16" && FloatSixteenRefused(model_type)) {
      throw std::invalid_argument("The model type " + vllm::v1::PyStrRepr(model_type) +
                                  " does not support float16. Reason: Numerical instability. Please use bfloat16 or "
                                  "float32 instead.");
    }
    return *requested;
  }
  return vllm::v1::DTypeByName(AutoRunDTypeName(cfg, ModelDTypeName(cfg)));
}

vllm::v1::KVCacheConfig ProbeKVCacheConfig(const Json& cfg, const ProbeRequest& request, int64_t num_blocks) {
  const DType model = RunDType(cfg, request.dtype);
  // Config-level refusals before any layer, in vLLM's order (VllmConfig.__post_init__: a mismatched float KV cache
  // dtype, then verify_with_parallel_config's heads check), so a hybrid with no attention layer is refused too.
  KVStorage(request, model);
  CheckHeadsDivisible(cfg, request.tensor_parallel_size);
  std::vector<std::string> kinds;  // first appearance order; one spec (and group) per kind
  std::vector<std::shared_ptr<vllm::v1::KVCacheSpec>> specs;
  std::vector<std::vector<std::string>> names;
  const std::vector<std::string> types = LayerTypes(cfg);
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string& kind = types[i];
    auto found = std::find(kinds.begin(), kinds.end(), kind);
    size_t index = static_cast<size_t>(found - kinds.begin());
    if (found == kinds.end()) {
      specs.push_back(kind == "linear_attention" ? GdnSpec(cfg, request, model)
                                                 : AttentionSpecFor(cfg, kind, request, model));
      kinds.push_back(kind);
      names.emplace_back();
    }
    names[index].push_back(LayerName(static_cast<int64_t>(i), kind));
  }
  vllm::v1::KVCacheConfig config;
  config.num_blocks = num_blocks;
  for (size_t g = 0; g < kinds.size(); ++g) {
    config.kv_cache_groups.emplace_back(names[g], specs[g]);
    config.kv_cache_groups.back().Validate();
  }
  return config;
}

}  // namespace vllm::entrypoints
