// The binding's view of vllm_model_params: offsetof and sizeof of the compiled header (include/vllm/capi/abi.h).
#include "vllm/capi/abi.h"

#include <cstring>
#include <stdexcept>
#include <type_traits>

namespace vllm::capi {
namespace {

template <typename T>
constexpr MemberKind KindOf() {
  if constexpr (std::is_same_v<T, const char*> || std::is_same_v<T, char*>) return MemberKind::kString;
  if constexpr (std::is_same_v<T, int32_t>) return MemberKind::kInt32;
  if constexpr (std::is_same_v<T, int64_t>) return MemberKind::kInt64;
  if constexpr (std::is_same_v<T, double>) return MemberKind::kDouble;
  return MemberKind::kOther;
}

template <typename T>
constexpr const char* CTypeOf() {
  if constexpr (std::is_same_v<T, const char*>) return "const char *";
  if constexpr (std::is_same_v<T, char*>) return "char *";
  if constexpr (std::is_same_v<T, int8_t>) return "int8_t";
  if constexpr (std::is_same_v<T, int16_t>) return "int16_t";
  if constexpr (std::is_same_v<T, int32_t>) return "int32_t";
  if constexpr (std::is_same_v<T, int64_t>) return "int64_t";
  if constexpr (std::is_same_v<T, uint8_t>) return "uint8_t";
  if constexpr (std::is_same_v<T, uint16_t>) return "uint16_t";
  if constexpr (std::is_same_v<T, uint32_t>) return "uint32_t";
  if constexpr (std::is_same_v<T, uint64_t>) return "uint64_t";
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, double>) return "double";
  if constexpr (std::is_same_v<T, const void*>) return "const void *";
  if constexpr (std::is_same_v<T, void*>) return "void *";
  return "other";
}

#define VLLM_CAPI_MEMBER_INFO(member, version)                                                            \
  MemberInfo{#member, KindOf<decltype(vllm_model_params::member)>(),                                     \
             CTypeOf<decltype(vllm_model_params::member)>(), offsetof(vllm_model_params, member),          \
             sizeof(vllm_model_params::member), version},

}  // namespace

const std::vector<MemberInfo>& Members() {
  static const std::vector<MemberInfo> members = {VLLM_CAPI_MEMBERS(VLLM_CAPI_MEMBER_INFO)};
  return members;
}

const MemberInfo& MemberOf(const std::string& name) {
  for (const MemberInfo& member : Members())
    if (name == member.name) return member;
  throw std::out_of_range("vllm_model_params has no member '" + name + "'");
}

MemberValue ReadMember(const vllm_model_params& params, const MemberInfo& member) {
  const char* base = reinterpret_cast<const char*>(&params) + member.offset;
  MemberValue value;
  value.kind = member.kind;
  switch (member.kind) {
    case MemberKind::kString: {
      const char* text = nullptr;
      std::memcpy(&text, base, sizeof text);
      if (text != nullptr) value.text = std::string(text);
      break;
    }
    case MemberKind::kInt32: {
      int32_t v = 0;
      std::memcpy(&v, base, sizeof v);
      value.integer = v;
      break;
    }
    case MemberKind::kInt64: {
      int64_t v = 0;
      std::memcpy(&v, base, sizeof v);
      value.integer = v;
      break;
    }
    case MemberKind::kDouble:
      std::memcpy(&value.real, base, sizeof value.real);
      break;
    case MemberKind::kOther:
      break;
  }
  return value;
}

}  // namespace vllm::capi
