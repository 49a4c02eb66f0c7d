// vllm_model_params <-> EngineParams (spec/c-abi.md CAPI-5.1 to CAPI-5.9; the member copy of vllm_engine_load in
// the C++ port's src/vllm_c.cpp; ported from impl/capi/convert.py): what zero and negative values mean, the
// refusal of a bad member (the first in struct order), and the inverse, which refuses what the struct cannot hold.
#pragma once

#include <list>
#include <optional>
#include <string>

#include "vllm/capi/abi.h"
#include "vllm/entrypoints/model_loader.h"

namespace vllm::capi {

using vllm::entrypoints::EngineParams;
using vllm::entrypoints::InvalidArgument;  // VLLM_ERR_INVALID_ARGUMENT; .field names the member

// A vllm_model_params that owns the text its string members point to.
class OwnedModelParams {
 public:
  OwnedModelParams();
  OwnedModelParams(OwnedModelParams&&) = default;
  OwnedModelParams& operator=(OwnedModelParams&&) = default;
  OwnedModelParams(const OwnedModelParams&) = delete;
  OwnedModelParams& operator=(const OwnedModelParams&) = delete;

  vllm_model_params params;
  void SetString(const MemberInfo& member, const std::optional<std::string>& text);  // bytes as given
  void SetInt(const MemberInfo& member, int64_t value);                               // kInt32 / kInt64
  void SetDouble(const MemberInfo& member, double value);

 private:
  std::list<std::string> strings_;
};

// Read a struct: block_size <= 0 is 32, num_blocks <= 0 auto (0), max_model_len and max_num_batched_tokens <= 0
// are 0, max_num_seqs <= 0 is 32; utilization 0.0 is the default 0.92 (not explicit), NaN or outside [0, 1]
// refused; kv_cache_memory_bytes < 0 refused; tri-states and device 0, 1 or 2; strings strict UTF-8. Throws
// InvalidArgument "vllm_model_params.<member> must be <accepted>, got <value>".
EngineParams EngineParamsFromC(const vllm_model_params& params);

// The inverse: a struct that reads back as `params`; text with a NUL or that is not UTF-8, or an int its member
// cannot hold, is refused (InvalidArgument naming the field).
OwnedModelParams ModelParamsFromEngine(const EngineParams& params);

// A member-by-member copy, every string duplicated.
OwnedModelParams CopyModelParams(const vllm_model_params& params);

// Strict UTF-8 (no overlong form, no surrogate, nothing above U+10FFFF); else the offset of the first bad byte.
std::optional<size_t> Utf8Error(const std::string& bytes);

}  // namespace vllm::capi
