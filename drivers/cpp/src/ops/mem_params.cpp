// See mem_params.h. Order and wording as impl/entrypoints/model_loader.py EngineParams.__post_init__.
#include "mem_params.h"

#include <algorithm>

#include "vllm/entrypoints/json_repr.h"
#include "vllm/v1/field_checks.h"

namespace gates::mem {

using vllm::entrypoints::CIntMembers;
using vllm::entrypoints::EngineParams;
using vllm::entrypoints::JsonInt;
using vllm::entrypoints::JsonIntKind;

EngineParams EngineParamsFrom(const Value& fields) {
  Mapping(fields, "EngineParams fields");
  static const std::vector<std::string> strings = {"model_path", "tokenizer_config_path", "tool_parser",
                                                   "reasoning_parser", "speculative_config", "scheduling_policy",
                                                   "kv_transfer_config"};
  static const std::vector<std::string> known = {
      "model_path", "tokenizer_config_path", "block_size", "num_blocks", "max_model_len", "max_num_seqs",
      "tool_parser", "reasoning_parser", "speculative_config", "enable_prefix_caching", "max_num_batched_tokens",
      "scheduling_policy", "kv_transfer_config", "enable_jump_forward", "device", "gpu_memory_utilization",
      "kv_cache_memory_bytes"};
  for (auto it = fields.begin(); it != fields.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) {
      Refuse("EngineParams.__init__() got an unexpected keyword argument '" + it.key() + "'");
    }
  }
  const std::string owner = "EngineParams";
  EngineParams params;
  auto text = [&](const std::string& name) -> std::optional<std::string> {
    const Value* v = Member(fields, name);
    return v ? ReadOptionalStr(owner, name, *v) : std::nullopt;
  };
  for (const std::string& name : strings) text(name);
  params.model_path = text("model_path");
  params.tokenizer_config_path = text("tokenizer_config_path");
  params.tool_parser = text("tool_parser");
  params.reasoning_parser = text("reasoning_parser");
  params.speculative_config = text("speculative_config");
  params.scheduling_policy = text("scheduling_policy");
  params.kv_transfer_config = text("kv_transfer_config");

  for (const auto& member : CIntMembers()) {
    const std::string name = member.name;
    const Value* v = Member(fields, name);
    if (v == nullptr) continue;
    int64_t value = 0;
    std::string digits;
    const JsonIntKind kind = v->is_boolean() ? JsonIntKind::kNot : JsonInt(*v, &value, &digits);
    if (kind == JsonIntKind::kBig && !digits.empty() && digits[0] != '-') {
      throw vllm::entrypoints::InvalidArgument(vllm::entrypoints::NoCSpellingMessage(name, digits), name);
    }
    value = ReadInt(owner, name, *v, member.minimum);
    if (value > member.maximum) {
      throw vllm::entrypoints::InvalidArgument(vllm::entrypoints::NoCSpellingMessage(name, std::to_string(value)),
                                               name);
    }
    if (name == "block_size") params.block_size = value;
    if (name == "num_blocks") params.num_blocks = value;
    if (name == "max_model_len") params.max_model_len = value;
    if (name == "max_num_batched_tokens") params.max_num_batched_tokens = value;
    if (name == "kv_cache_memory_bytes") params.kv_cache_memory_bytes = value;
    if (name == "max_num_seqs") params.max_num_seqs = value;
  }
  for (const char* name : {"enable_prefix_caching", "enable_jump_forward", "device"}) {
    const Value* v = Member(fields, name);
    if (v == nullptr) continue;
    int64_t value = 0;
    // An int (a bool is one in Python, and is then refused as a choice); 2.0 is refused, not compared equal to 2.
    if (!v->is_boolean() && JsonInt(*v, &value) == JsonIntKind::kNot) {
      Refuse(owner + "." + name + " must be one of [0, 1, 2] (an int), got " + PyJsonRepr(*v) + " (" +
             PyJsonTypeName(*v) + ")");
    }
    if (v->is_boolean() || JsonInt(*v, &value) != JsonIntKind::kFits) {
      Refuse(owner + "." + name + " must be one of [0, 1, 2], got " + PyJsonRepr(*v));
    }
    vllm::v1::CheckChoice(owner, name, value, {0, 1, 2});
    if (std::string(name) == "enable_prefix_caching") params.enable_prefix_caching = value;
    if (std::string(name) == "enable_jump_forward") params.enable_jump_forward = value;
    if (std::string(name) == "device") params.device = value;
  }
  if (const Value* v = Member(fields, "gpu_memory_utilization")) {
    params.gpu_memory_utilization = ReadFraction(owner, "gpu_memory_utilization", *v);
  }
  params.Validate();
  return params;
}

Value ParamsView(const EngineParams& params) {
  Value view = Value::object();
  view["block_size"] = params.block_size;
  view["num_blocks"] = params.num_blocks;
  view["kv_cache_memory_bytes"] = params.kv_cache_memory_bytes;
  view["max_model_len"] = params.max_model_len;
  view["gpu_memory_utilization"] = params.gpu_memory_utilization_value();
  view["utilization_explicit"] = params.gpu_memory_utilization_is_explicit();
  return view;
}

Value EngineParamsView(const EngineParams& params) {
  Value view = ParamsView(params);
  view["max_num_seqs"] = params.max_num_seqs;
  view["max_num_batched_tokens"] = params.max_num_batched_tokens;
  view["enable_prefix_caching"] = params.enable_prefix_caching;
  view["enable_jump_forward"] = params.enable_jump_forward;
  view["device"] = params.device;
  return view;
}

}  // namespace gates::mem
