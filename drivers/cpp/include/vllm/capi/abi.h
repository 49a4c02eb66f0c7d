// The binding's view of vllm_model_params (spec/c-abi.md CAPI-1.4, CAPI-2): each member's name, C type, offset and
// size as the compiler lays out the header this port is built against, and the ABI version that appended it.
//
// Names as the C++ port's C ABI (include/vllm.h, src/vllm_c.cpp); the member list is the port's v16 struct.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vllm/capi/vllm_h.h"

namespace vllm::capi {

// X(member, version that appended it), in struct order (CAPI-1.4).
#define VLLM_CAPI_MEMBERS(X)                                                                                  \
  X(model_path, 1) X(tokenizer_config_path, 1) X(block_size, 1) X(num_blocks, 1) X(max_model_len, 1)          \
  X(max_num_seqs, 1) X(tool_parser, 4) X(reasoning_parser, 5) X(speculative_config, 6)                        \
  X(enable_prefix_caching, 7) X(max_num_batched_tokens, 9) X(scheduling_policy, 9) X(kv_transfer_config, 9)   \
  X(enable_jump_forward, 10) X(device, 14) X(gpu_memory_utilization, 16) X(kv_cache_memory_bytes, 16)

enum class MemberKind { kString, kInt32, kInt64, kDouble, kOther };

// One member as compiled: its C type spelled as the header spells it ("const char *", "int32_t", "double", ...).
struct MemberInfo {
  const char* name;
  MemberKind kind;
  const char* ctype;
  std::size_t offset;
  std::size_t size;
  int since;
};

// The members, in struct order.
const std::vector<MemberInfo>& Members();
const MemberInfo& MemberOf(const std::string& name);  // std::out_of_range for another name

// VLLM_ABI_VERSION of the header the port is compiled against.
constexpr int kAbiVersion = VLLM_ABI_VERSION;

// A member's value as plain data: text (nullopt for NULL) or a number.
struct MemberValue {
  MemberKind kind = MemberKind::kInt32;
  std::optional<std::string> text;  // kString
  int64_t integer = 0;              // kInt32, kInt64
  double real = 0.0;                // kDouble
};

MemberValue ReadMember(const vllm_model_params& params, const MemberInfo& member);

}  // namespace vllm::capi
