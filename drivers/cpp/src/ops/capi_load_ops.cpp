// CAPI-ABI load-verdict (gate bad-values): a raw struct through the sizing step of vllm_engine_load
// (include/vllm/capi/load.h), seen as gates/rows/capi_abi/subjects.py verdict: status name and code, the member
// the message names, the block count and what the load read.
#include "capi_common.h"
#include "vllm/capi/load.h"

namespace gates::capi {

void SetRawMember(vllm::capi::OwnedModelParams& out, const vllm::capi::MemberInfo& member, const Value& value);

namespace {

// The member a message names as vllm_model_params.<member> (the first), else null.
Value NamedMember(const std::optional<std::string>& message) {
  static const std::string marker = "vllm_model_params.";
  if (!message) return nullptr;
  const size_t at = message->find(marker);
  if (at == std::string::npos) return nullptr;
  size_t begin = at + marker.size(), end = begin;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  if (end >= message->size() || !(std::isalpha(static_cast<unsigned char>((*message)[end])) || (*message)[end] == '_'))
    return nullptr;
  while (end < message->size() && word((*message)[end])) ++end;
  return message->substr(begin, end - begin);
}

GATES_CAPI_OPERATION("load-verdict", [](const Value& input) -> Value {
  const Value* given = Find(input, "members");
  const Value members = given == nullptr ? Value::object() : *given;
  for (auto it = members.begin(); it != members.end(); ++it) vllm::capi::MemberOf(it.key());  // unknown: refused
  vllm::capi::OwnedModelParams params;
  for (auto it = members.begin(); it != members.end(); ++it)
    SetRawMember(params, vllm::capi::MemberOf(it.key()), it.value());
  const vllm::v1::KVCacheConfig probe = ProbeConfig(Find(input, "probe"));
  const vllm::capi::LoadResult result = vllm::capi::EngineLoad(params.params, probe);
  Value out = Value::object();
  out["status"] = vllm::capi::StatusName(result.status);
  out["code"] = static_cast<int>(result.status);
  out["field"] = NamedMember(result.error);
  out["num_blocks"] = result.num_blocks ? Value(*result.num_blocks) : Value(nullptr);
  out["read"] = result.engine_params ? Describe(*result.engine_params) : Value(nullptr);
  return out;
});

}  // namespace
}  // namespace gates::capi
