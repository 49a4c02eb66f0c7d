// vllm_model_params <-> EngineParams (include/vllm/capi/convert.h).
#include "vllm/capi/convert.h"

#include <cmath>
#include <cstring>

#include "vllm/v1/float_repr.h"
#include "vllm/v1/str_repr.h"

namespace vllm::capi {
namespace {

using vllm::v1::PyFloatRepr;
using vllm::v1::PyStrRepr;

void* Address(vllm_model_params& params, const MemberInfo& member) {
  return reinterpret_cast<char*>(&params) + member.offset;
}

// Python's repr of bytes: b'\xff' (for a refused string member).
std::string PyBytesRepr(const std::string& bytes) {
  const bool single = bytes.find('\'') == std::string::npos || bytes.find('"') != std::string::npos;
  const char quote = single ? '\'' : '"';
  std::string out = std::string("b") + quote;
  static const char hex[] = "0123456789abcdef";
  for (unsigned char c : bytes) {
    if (c == '\\' || c == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + quote;
}

[[noreturn]] void Refuse(const std::string& name, const std::string& shown, const std::string& accepted) {
  throw InvalidArgument("vllm_model_params." + name + " must be " + accepted + ", got " + shown, name);
}

std::optional<std::string> StringFromC(const MemberInfo& member, const MemberValue& raw) {
  if (!raw.text) return std::nullopt;
  if (auto bad = Utf8Error(*raw.text))
    Refuse(member.name, PyBytesRepr(*raw.text), "NULL or UTF-8 text (invalid UTF-8 at byte " + std::to_string(*bad) + ")");
  return raw.text;
}

int64_t PositiveOr(const MemberValue& raw, int64_t fallback) { return raw.integer > 0 ? raw.integer : fallback; }

int64_t Choice(const MemberInfo& member, const MemberValue& raw) {
  if (raw.integer < 0 || raw.integer > 2) Refuse(member.name, std::to_string(raw.integer), "0, 1 or 2");
  return raw.integer;
}

void StringToC(OwnedModelParams& out, const MemberInfo& member, const std::optional<std::string>& text) {
  if (text) {
    const std::string field = member.name;
    if (text->find('\0') != std::string::npos)
      throw InvalidArgument("EngineParams." + field + " has a NUL character, which a C string cannot hold: " +
                                PyStrRepr(*text), field);
    if (Utf8Error(*text))
      throw InvalidArgument("EngineParams." + field + " cannot be written as UTF-8 (surrogates not allowed): " +
                                PyStrRepr(*text), field);
  }
  out.SetString(member, text);
}

void IntToC(OwnedModelParams& out, const MemberInfo& member, int64_t value) {
  if (member.kind == MemberKind::kInt32 && (value < INT32_MIN || value > INT32_MAX)) {
    throw InvalidArgument("EngineParams." + std::string(member.name) + "=" + std::to_string(value) +
                              " has no int32_t spelling in vllm_model_params (accepted: -2147483648..2147483647)",
                          member.name);
  }
  out.SetInt(member, value);
}

}  // namespace

OwnedModelParams::OwnedModelParams() { std::memset(&params, 0, sizeof params); }

void OwnedModelParams::SetString(const MemberInfo& member, const std::optional<std::string>& text) {
  const char* pointer = nullptr;
  if (text) {
    strings_.push_back(*text);
    pointer = strings_.back().c_str();
  }
  std::memcpy(Address(params, member), &pointer, sizeof pointer);
}

void OwnedModelParams::SetInt(const MemberInfo& member, int64_t value) {
  if (member.kind == MemberKind::kInt32) {
    const int32_t narrow = static_cast<int32_t>(value);
    std::memcpy(Address(params, member), &narrow, sizeof narrow);
  } else {
    std::memcpy(Address(params, member), &value, sizeof value);
  }
}

void OwnedModelParams::SetDouble(const MemberInfo& member, double value) {
  std::memcpy(Address(params, member), &value, sizeof value);
}

std::optional<size_t> Utf8Error(const std::string& bytes) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char lead = s[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    int more = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      more = 1;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      more = 2;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      more = 3;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      return i;
    }
    if (i + 1 >= n || s[i + 1] < low || s[i + 1] > high) return i;
    for (int k = 2; k <= more; ++k)
      if (i + k >= n || s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
    i += more + 1;
  }
  return std::nullopt;
}

EngineParams EngineParamsFromC(const vllm_model_params& params) {
  EngineParams read;
  for (const MemberInfo& member : Members()) {
    const MemberValue raw = ReadMember(params, member);
    const std::string name = member.name;
    if (name == "model_path") read.model_path = StringFromC(member, raw);
    else if (name == "tokenizer_config_path") read.tokenizer_config_path = StringFromC(member, raw);
    else if (name == "block_size") read.block_size = PositiveOr(raw, 32);
    else if (name == "num_blocks") read.num_blocks = PositiveOr(raw, 0);
    else if (name == "max_model_len") read.max_model_len = PositiveOr(raw, 0);
    else if (name == "max_num_seqs") read.max_num_seqs = PositiveOr(raw, 32);
    else if (name == "tool_parser") read.tool_parser = StringFromC(member, raw);
    else if (name == "reasoning_parser") read.reasoning_parser = StringFromC(member, raw);
    else if (name == "speculative_config") read.speculative_config = StringFromC(member, raw);
    else if (name == "enable_prefix_caching") read.enable_prefix_caching = Choice(member, raw);
    else if (name == "max_num_batched_tokens") read.max_num_batched_tokens = PositiveOr(raw, 0);
    else if (name == "scheduling_policy") read.scheduling_policy = StringFromC(member, raw);
    else if (name == "kv_transfer_config") read.kv_transfer_config = StringFromC(member, raw);
    else if (name == "enable_jump_forward") read.enable_jump_forward = Choice(member, raw);
    else if (name == "device") read.device = Choice(member, raw);
    else if (name == "gpu_memory_utilization") {
      const double u = raw.real;
      if (std::isnan(u) || u < 0.0 || u > 1.0)
        Refuse(name, PyFloatRepr(u), "0.0 (the default, 0.92) or a fraction in (0, 1]");
      if (u == 0.0) read.gpu_memory_utilization.reset();
      else read.gpu_memory_utilization = u;
    } else if (name == "kv_cache_memory_bytes") {
      if (raw.integer < 0) Refuse(name, std::to_string(raw.integer), "0 (unset) or a positive number of bytes");
      read.kv_cache_memory_bytes = raw.integer;
    }
  }
  try {
    read.Validate();
  } catch (const std::invalid_argument& err) {
    throw InvalidArgument(std::string("vllm_model_params: ") + err.what(), "");
  }
  return read;
}

OwnedModelParams ModelParamsFromEngine(const EngineParams& params) {
  OwnedModelParams out;
  for (const MemberInfo& member : Members()) {
    const std::string name = member.name;
    if (name == "model_path") StringToC(out, member, params.model_path);
    else if (name == "tokenizer_config_path") StringToC(out, member, params.tokenizer_config_path);
    else if (name == "block_size") IntToC(out, member, params.block_size);
    else if (name == "num_blocks") IntToC(out, member, params.num_blocks);
    else if (name == "max_model_len") IntToC(out, member, params.max_model_len);
    else if (name == "max_num_seqs") IntToC(out, member, params.max_num_seqs);
    else if (name == "tool_parser") StringToC(out, member, params.tool_parser);
    else if (name == "reasoning_parser") StringToC(out, member, params.reasoning_parser);
    else if (name == "speculative_config") StringToC(out, member, params.speculative_config);
    else if (name == "enable_prefix_caching") IntToC(out, member, params.enable_prefix_caching);
    else if (name == "max_num_batched_tokens") IntToC(out, member, params.max_num_batched_tokens);
    else if (name == "scheduling_policy") StringToC(out, member, params.scheduling_policy);
    else if (name == "kv_transfer_config") StringToC(out, member, params.kv_transfer_config);
    else if (name == "enable_jump_forward") IntToC(out, member, params.enable_jump_forward);
    else if (name == "device") IntToC(out, member, params.device);
    else if (name == "gpu_memory_utilization") out.SetDouble(member, params.gpu_memory_utilization.value_or(0.0));
    else if (name == "kv_cache_memory_bytes") IntToC(out, member, params.kv_cache_memory_bytes);
  }
  return out;
}

OwnedModelParams CopyModelParams(const vllm_model_params& params) {
  OwnedModelParams out;
  for (const MemberInfo& member : Members()) {
    const MemberValue value = ReadMember(params, member);
    switch (member.kind) {
      case MemberKind::kString: out.SetString(member, value.text); break;
      case MemberKind::kInt32:
      case MemberKind::kInt64: out.SetInt(member, value.integer); break;
      case MemberKind::kDouble: out.SetDouble(member, value.real); break;
      case MemberKind::kOther: break;
    }
  }
  return out;
}

}  // namespace vllm::capi
