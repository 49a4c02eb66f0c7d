// See include/vllm/v1/kv_cache_interface.h. Formulas and refusals as impl/v1/kv_cache_interface.py (which cites
// vllm/v1/kv_cache_interface.py); the messages keep the Python port's wording.
#include "vllm/v1/kv_cache_interface.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "vllm/v1/checked_math.h"
#include "vllm/v1/field_checks.h"
#include "vllm/v1/str_repr.h"

namespace vllm::v1 {

namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// The max-usage arguments checked; the batched-token count (max_model_len when unset).
int64_t CheckUsageArgs(const std::string& owner, int64_t max_model_len, std::optional<int64_t> batched) {
  CheckInt(owner, "max_model_len", max_model_len, 1);
  CheckOptionalInt(owner, "max_num_batched_tokens", batched, 1);
  return batched.value_or(max_model_len);
}

}  // namespace

const std::vector<std::pair<std::string, KVQuantMode>>& KVQuantModeMembers() {
  static const std::vector<std::pair<std::string, KVQuantMode>> members{
      {"NONE", KVQuantMode::kNone},
      {"FP8_PER_TENSOR", KVQuantMode::kFp8PerTensor},
      {"INT8_PER_TOKEN_HEAD", KVQuantMode::kInt8PerTokenHead},
      {"FP8_PER_TOKEN_HEAD", KVQuantMode::kFp8PerTokenHead},
      {"INT4_PER_TOKEN_HEAD", KVQuantMode::kInt4PerTokenHead},
      {"NVFP4", KVQuantMode::kNvfp4},
      {"TURBOQUANT_K8V4", KVQuantMode::kTurboquantK8v4},
      {"TURBOQUANT_4BIT_NC", KVQuantMode::kTurboquant4bitNc},
      {"TURBOQUANT_K3V4_NC", KVQuantMode::kTurboquantK3v4Nc},
      {"TURBOQUANT_3BIT_NC", KVQuantMode::kTurboquant3bitNc},
      {"NVFP4_DS_MLA", KVQuantMode::kNvfp4DsMla},
      {"ULTRAQUANT_4BIT", KVQuantMode::kUltraquant4bit},
      {"OCTAVE_K3V4", KVQuantMode::kOctaveK3v4},
      {"OCTAVE_K3V3", KVQuantMode::kOctaveK3v3},
      {"OCTAVE_K3V3_COMPACT", KVQuantMode::kOctaveK3v3Compact},
      {"CUSTOM", KVQuantMode::kOctaveK3v4},  // vLLM's alias of OCTAVE_K3V4
  };
  return members;
}

const char* KVQuantModeName(KVQuantMode mode) {
  for (const auto& [name, member] : KVQuantModeMembers()) {
    if (member == mode) return name.c_str();  // the first spelling: the member, never the alias
  }
  return "UNKNOWN";
}

std::optional<KVQuantMode> KVQuantModeByName(const std::string& name) {
  for (const auto& [spelling, member] : KVQuantModeMembers()) {
    if (spelling == name) return member;
  }
  return std::nullopt;
}

bool IsPerTokenHead(KVQuantMode mode) {
  return mode == KVQuantMode::kInt8PerTokenHead || mode == KVQuantMode::kFp8PerTokenHead ||
         mode == KVQuantMode::kInt4PerTokenHead;
}

bool IsLaidOut(KVQuantMode mode) {
  return mode == KVQuantMode::kNone || mode == KVQuantMode::kFp8PerTensor || mode == KVQuantMode::kInt8PerTokenHead ||
         mode == KVQuantMode::kFp8PerTokenHead || mode == KVQuantMode::kNvfp4;
}

KVQuantMode kv_quant_mode_for(const std::string& cache_dtype) {
  auto starts = [&cache_dtype](const char* prefix) { return cache_dtype.rfind(prefix, 0) == 0; };
  if (cache_dtype == "int4_per_token_head") return KVQuantMode::kInt4PerTokenHead;
  if (cache_dtype == "int8_per_token_head") return KVQuantMode::kInt8PerTokenHead;
  if (cache_dtype == "fp8_per_token_head") return KVQuantMode::kFp8PerTokenHead;
  if (cache_dtype == "nvfp4_ds_mla") return KVQuantMode::kNvfp4DsMla;  // before the nvfp4 prefix
  if (cache_dtype == "ultraquant_4bit") return KVQuantMode::kUltraquant4bit;
  if (starts("nvfp4")) return KVQuantMode::kNvfp4;
  if (starts("turboquant_") || starts("octave_")) {
    std::string upper = cache_dtype;
    std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
    const std::optional<KVQuantMode> member = KVQuantModeByName(upper);
    if (!member.has_value()) {
      throw std::invalid_argument("kv_cache_dtype '" + cache_dtype + "' names no KVQuantMode member '" + upper + "'");
    }
    return *member;
  }
  if (starts("fp8")) return KVQuantMode::kFp8PerTensor;
  return KVQuantMode::kNone;
}

int64_t nvfp4_bytes_per_head(int64_t width) { return width / 2 + width / 16; }

// ---------------------------------------------------------------------------------------------- KVCacheSpec
void KVCacheSpec::check_fields() const { CheckInt(type_name(), "block_size", block_size, 1); }

// ---------------------------------------------------------------------------------------------- AttentionSpec
void AttentionSpec::check_fields() const {
  KVCacheSpec::check_fields();
  const std::string owner = type_name();
  CheckInt(owner, "num_kv_heads", num_kv_heads, 1);
  CheckInt(owner, "head_size", head_size, 1);
  if (kv_quant_mode != KVQuantMode::kNone && dtype.itemsize != 1) {
    throw std::invalid_argument(owner + ".dtype must be a 1-byte dtype with kv_quant_mode=" +
                                KVQuantModeName(kv_quant_mode) + ", got " + dtype.torch_str());
  }
  if (!IsLaidOut(kv_quant_mode)) {
    throw std::invalid_argument(owner + ".kv_quant_mode " + KVQuantModeName(kv_quant_mode) +
                                " has no page layout in this port");
  }
  if (kv_quant_mode == KVQuantMode::kNvfp4 && kind() != KVCacheSpecKind::kFullAttention) {
    throw std::invalid_argument(owner + ".kv_quant_mode NVFP4 is only laid out for FullAttentionSpec, got " + owner);
  }
  CheckOptionalInt(owner, "page_size_padded", page_size_padded, 1);
}

void AttentionSpec::check_page() const {
  const int64_t unpadded = unpadded_page_size_bytes();
  if (page_size_padded.has_value() && *page_size_padded < unpadded) {
    throw std::invalid_argument(std::string(type_name()) + ".page_size_padded must be >= the real page size " +
                                Str(unpadded) + ", got " + Str(*page_size_padded));
  }
}

int64_t AttentionSpec::data_page_size_bytes() const {
  int64_t bytes = CheckedMul(2 * block_size, num_kv_heads, "a KV page");
  bytes = CheckedMul(bytes, head_size, "a KV page");
  return CheckedMul(bytes, dtype.itemsize, "a KV page");
}

int64_t AttentionSpec::scale_bytes_per_page() const {
  if (!IsPerTokenHead(kv_quant_mode)) return 0;
  return CheckedMul(CheckedMul(2 * block_size, num_kv_heads, "KV scales"), kFloat32Bytes, "KV scales");
}

int64_t AttentionSpec::real_page_size_bytes() const {
  return CheckedAdd(data_page_size_bytes(), scale_bytes_per_page(), "a KV page");
}

int64_t AttentionSpec::page_size_bytes() const {
  return page_size_padded.has_value() ? *page_size_padded : unpadded_page_size_bytes();
}

// ---------------------------------------------------------------------------------------------- FullAttentionSpec
void FullAttentionSpec::check_fields() const {
  AttentionSpec::check_fields();
  const std::string owner = type_name();
  check_head_size_v();
  CheckOptionalInt(owner, "sliding_window", sliding_window, 1);
  CheckOptionalInt(owner, "attention_chunk_size", attention_chunk_size, 1);
  if (sliding_window.has_value() && attention_chunk_size.has_value()) {
    throw std::invalid_argument(owner + " sets both sliding_window=" + Str(*sliding_window) +
                                " and attention_chunk_size=" + Str(*attention_chunk_size) +
                                "; at most one may be set");
  }
  if (kv_quant_mode == KVQuantMode::kNvfp4) {
    for (const auto& [name, width] : {std::pair<const char*, int64_t>{"head_size", head_size},
                                      std::pair<const char*, int64_t>{"head_size_v", head_size_v}}) {
      if (width % 16) {
        throw std::invalid_argument(owner + "." + name + " must be a multiple of 16 for NVFP4, got " + Str(width));
      }
    }
    if (head_size_v != head_size) {
      throw std::invalid_argument(owner + ".head_size_v must equal head_size (" + Str(head_size) +
                                  ") for NVFP4: K and V are laid out as equal head slots, got " + Str(head_size_v));
    }
  }
}

void FullAttentionSpec::check_head_size_v() const { CheckInt(type_name(), "head_size_v", head_size_v, 1); }

int64_t FullAttentionSpec::data_page_size_bytes() const {
  const int64_t widths = kv_quant_mode == KVQuantMode::kNvfp4
                             ? nvfp4_bytes_per_head(head_size) + nvfp4_bytes_per_head(head_size_v)
                             : CheckedAdd(head_size, head_size_v, "a KV page");
  int64_t bytes = CheckedMul(block_size, num_kv_heads, "a KV page");
  bytes = CheckedMul(bytes, widths, "a KV page");
  return CheckedMul(bytes, dtype.itemsize, "a KV page");
}

int64_t FullAttentionSpec::max_memory_usage_bytes(int64_t max_model_len,
                                                  std::optional<int64_t> max_num_batched_tokens) const {
  CheckUsageArgs(type_name(), max_model_len, max_num_batched_tokens);
  return CheckedMul(CeilDiv(max_model_len, block_size), page_size_bytes(), "a request's KV bytes");
}

// ---------------------------------------------------------------------------------------------- MLAAttentionSpec
void MLAAttentionSpec::check_fields() const {
  FullAttentionSpec::check_fields();
  const std::string owner = type_name();
  if (cache_dtype_str.has_value() && *cache_dtype_str == kFp8DsMla) {
    if (head_size != kFp8DsMlaHeadSize) {
      throw std::invalid_argument(owner + ".head_size must be " + Str(kFp8DsMlaHeadSize) +
                                  " with cache_dtype_str='fp8_ds_mla', got " + Str(head_size));
    }
    if (num_kv_heads != 1) {
      throw std::invalid_argument(owner + ".num_kv_heads must be 1 with 'fp8_ds_mla', got " + Str(num_kv_heads));
    }
    if (dtype.itemsize != 1) {
      throw std::invalid_argument(owner + ".dtype must be a 1-byte dtype with 'fp8_ds_mla', got " +
                                  dtype.torch_str());
    }
  }
}

void MLAAttentionSpec::check_head_size_v() const {
  const std::string owner = type_name();
  CheckInt(owner, "head_size_v", head_size_v, 0);
  if (head_size_v != 0) {
    throw std::invalid_argument(owner + ".head_size_v must be 0 (an MLA cache holds one latent, no separate V), got " +
                                Str(head_size_v));
  }
}

int64_t MLAAttentionSpec::data_page_size_bytes() const {
  if (cache_dtype_str.has_value() && *cache_dtype_str == kFp8DsMla) {
    return CheckedMul(block_size, kFp8DsMlaBytesPerToken, "an MLA page");
  }
  // One latent per token: no K+V factor 2 (vllm/v1/kv_cache_interface.py MLAAttentionSpec.real_page_size_bytes).
#ifdef GATES_PLANT_MLA_FACTOR_TWO
  // PLANTED DEFECT (gates self-check): MLA keeps the K+V factor 2 of full attention.
  int64_t bytes = CheckedMul(2 * block_size, num_kv_heads, "an MLA page");
#else
  int64_t bytes = CheckedMul(block_size, num_kv_heads, "an MLA page");
#endif
  bytes = CheckedMul(bytes, head_size, "an MLA page");
  return CheckedMul(bytes, dtype.itemsize, "an MLA page");
}

// ---------------------------------------------------------------------------------------------- SlidingWindowSpec
void SlidingWindowSpec::check_fields() const {
  AttentionSpec::check_fields();
  CheckInt(type_name(), "sliding_window", sliding_window, 1);
}

int64_t SlidingWindowSpec::max_memory_usage_bytes(int64_t max_model_len,
                                                  std::optional<int64_t> max_num_batched_tokens) const {
  const int64_t batched = CheckUsageArgs(type_name(), max_model_len, max_num_batched_tokens);
  // The extra page covers a window that starts mid-page.
  const int64_t tokens = std::min(CheckedAdd(sliding_window - 1, batched, "a window"), max_model_len);
  return CheckedMul(CeilDiv(tokens, block_size) + 1, page_size_bytes(), "a request's KV bytes");
}

// ---------------------------------------------------------------------------------------------- ChunkedLocal
void ChunkedLocalAttentionSpec::check_fields() const {
  AttentionSpec::check_fields();
  CheckInt(type_name(), "attention_chunk_size", attention_chunk_size, 1);
}

int64_t ChunkedLocalAttentionSpec::max_memory_usage_bytes(int64_t max_model_len,
                                                          std::optional<int64_t> max_num_batched_tokens) const {
  const int64_t batched = CheckUsageArgs(type_name(), max_model_len, max_num_batched_tokens);
  const int64_t tokens = std::min(CheckedAdd(attention_chunk_size, batched, "a chunk"), max_model_len);
  return CheckedMul(CeilDiv(tokens, block_size), page_size_bytes(), "a request's KV bytes");
}

// ---------------------------------------------------------------------------------------------- MambaSpec
void MambaSpec::check_fields() const {
  KVCacheSpec::check_fields();
  const std::string owner = type_name();
  if (shapes.empty()) {
    throw std::invalid_argument(owner + ".shapes must be a non-empty tuple of shapes, got ()");
  }
  if (dtypes.size() != shapes.size()) {
    std::string shown = "(";
    for (size_t i = 0; i < dtypes.size(); ++i) shown += (i ? ", " : "") + dtypes[i].torch_str();
    shown += dtypes.size() == 1 ? ",)" : ")";
    throw std::invalid_argument(owner + ".dtypes must be a tuple with one dtype per shape (" + Str(shapes.size()) +
                                "), got " + shown);
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (shapes[i].empty()) {
      throw std::invalid_argument(owner + ".shapes[" + Str(i) + "] must be a non-empty tuple of ints, got ()");
    }
    for (size_t j = 0; j < shapes[i].size(); ++j) {
      CheckInt(owner, "shapes[" + Str(i) + "][" + Str(j) + "]", shapes[i][j], 1);
    }
  }
  CheckOptionalInt(owner, "page_size_padded", page_size_padded, 1);
  if (mamba_cache_mode != "none" && mamba_cache_mode != "align") {
    throw std::invalid_argument(owner + ".mamba_cache_mode must be one of ['none', 'align'], got " +
                                PyStrRepr(mamba_cache_mode));
  }
  CheckInt(owner, "num_speculative_blocks", num_speculative_blocks, 0);
  CheckInt(owner, "num_prefill_checkpoint_blocks", num_prefill_checkpoint_blocks, 0);
}

void MambaSpec::check_page() const {
  const int64_t real = real_page_size_bytes();
  if (page_size_padded.has_value() && *page_size_padded < real) {
    throw std::invalid_argument(std::string(type_name()) + ".page_size_padded must be >= the real page size " +
                                Str(real) + ", got " + Str(*page_size_padded));
  }
}

int64_t MambaSpec::real_page_size_bytes() const {
  int64_t total = 0;
  for (size_t i = 0; i < shapes.size() && i < dtypes.size(); ++i) {
    int64_t elements = 1;
    for (int64_t extent : shapes[i]) elements = CheckedMul(elements, extent, "a state tensor");
    total = CheckedAdd(total, CheckedMul(elements, dtypes[i].itemsize, "a state tensor"), "a Mamba state");
  }
  return total;
}

int64_t MambaSpec::page_size_bytes() const {
  return page_size_padded.has_value() ? *page_size_padded : real_page_size_bytes();
}

int64_t MambaSpec::max_memory_usage_bytes(int64_t max_model_len, std::optional<int64_t> max_num_batched_tokens) const {
  CheckUsageArgs(type_name(), max_model_len, max_num_batched_tokens);
  // vLLM 0.33.0 MambaSpec.max_memory_usage_bytes: (2 + speculative + prefill checkpoints) states in align mode,
  // else (1 + speculative).
  const int64_t states = mamba_cache_mode == "align"
                             ? CheckedAdd(2 + num_speculative_blocks, num_prefill_checkpoint_blocks, "Mamba states")
                             : 1 + num_speculative_blocks;
  return CheckedMul(states, page_size_bytes(), "a request's state bytes");
}

// ---------------------------------------------------------------------------------------------- groups, config
void KVCacheGroupSpec::Validate() const {
  auto shown = [this] {
    std::string out = "(";
    for (size_t i = 0; i < layer_names.size(); ++i) out += (i ? ", '" : "'") + layer_names[i] + "'";
    return out + (layer_names.size() == 1 ? ",)" : ")");
  };
  bool valid = !layer_names.empty();
  for (const std::string& name : layer_names) valid = valid && !name.empty();
  if (!valid) {
    throw std::invalid_argument("KVCacheGroupSpec.layer_names must be a non-empty tuple of names, got " + shown());
  }
  std::vector<std::string> sorted = layer_names;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw std::invalid_argument("KVCacheGroupSpec.layer_names must not repeat a name, got " + shown());
  }
  if (kv_cache_spec == nullptr) {
    throw std::invalid_argument("KVCacheGroupSpec.kv_cache_spec must be a KVCacheSpec, got None");
  }
}

bool KVCacheConfig::has_mamba_layers() const {
  for (const KVCacheGroupSpec& group : kv_cache_groups) {
    if (group.kv_cache_spec && group.kv_cache_spec->kind() == KVCacheSpecKind::kMamba) return true;
  }
  return false;
}

}  // namespace vllm::v1
