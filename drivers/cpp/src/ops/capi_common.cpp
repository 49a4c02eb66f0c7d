// See capi_common.h: error kinds, settings, files, the plain views and the KV probe.
#include "capi_common.h"

#include <fstream>
#include <sstream>

#include "vllm/capi/header_reader.h"
#include "vllm/capi/library.h"
#include "vllm/entrypoints/json_repr.h"
#include "vllm/v1/dtypes.h"

namespace gates::capi {

using vllm::capi::MemberInfo;
using vllm::capi::MemberKind;

Value Guarded(const Operation& body, const Value& input) {
  try {
    return body(input);
  } catch (const Raised&) {
    throw;
  } catch (const vllm::capi::AbiHistoryError& err) {
    throw Raised("abi-history", err.what());
  } catch (const vllm::capi::AbiVersionMismatch& err) {
    throw Raised("abi-version", err.what());
  } catch (const std::invalid_argument& err) {
    throw Raised("invalid-argument", err.what());
  } catch (const std::out_of_range& err) {
    throw Raised("invalid-argument", err.what());
  } catch (const std::overflow_error& err) {
    throw Raised("invalid-argument", err.what());
  } catch (const nlohmann::json::exception& err) {
    throw Raised("invalid-argument", std::string("malformed case input: ") + err.what());
  } catch (const std::runtime_error& err) {
    throw Raised("runtime-error", err.what());
  }
}

std::string ConfiguredHeaderPath() { return setting("header", "spec/include/vllm.h"); }

std::optional<std::string> ConfiguredLibraryPath() {
  const std::string value = setting("library", "");
  if (value.empty()) return std::nullopt;
  return value.find('/') == std::string::npos ? "./" + value : value;  // a bare name would search the linker path
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string FixtureText(const Value& name) {
  const std::string dir = "gates/rows/capi_abi/fixtures/";
  if (!name.is_string() || name.get<std::string>().empty() ||
      name.get<std::string>().find('/') != std::string::npos) {
    throw std::invalid_argument("unknown header fixture " + vllm::entrypoints::PyJsonRepr(name));
  }
  std::ifstream probe(dir + name.get<std::string>());
  if (!probe) throw std::invalid_argument("unknown header fixture " + vllm::entrypoints::PyJsonRepr(name));
  return ReadText(dir + name.get<std::string>());
}

void NoArguments(const Value& input) {
  const bool empty = input.is_null() || (input.is_object() && input.empty()) ||
                     (input.is_object() && input.contains("$map") && input["$map"].empty());
  if (!empty)
    throw std::invalid_argument("this gate's impl takes no input, got " + vllm::entrypoints::PyJsonRepr(input));
}

const Value* Find(const Value& object, const std::string& name) {
  if (!object.is_object()) return nullptr;
  if (object.size() == 1 && object.contains("$map") && object["$map"].is_array()) {
    for (const Value& pair : object["$map"])
      if (pair.is_array() && pair.size() == 2 && pair[0].is_string() && pair[0].get<std::string>() == name)
        return &pair[1];
    return nullptr;
  }
  auto it = object.find(name);
  return it == object.end() ? nullptr : &*it;
}

Value MemberValues(const vllm_model_params& params) {
  Value out = Value::object();
  for (const MemberInfo& member : vllm::capi::Members()) {
    const vllm::capi::MemberValue value = vllm::capi::ReadMember(params, member);
    switch (member.kind) {
      case MemberKind::kString:
        out[member.name] = value.text ? Value(*value.text) : Value(nullptr);
        break;
      case MemberKind::kInt32:
      case MemberKind::kInt64:
        out[member.name] = value.integer;
        break;
      case MemberKind::kDouble:
        out[member.name] = value.real;
        break;
      case MemberKind::kOther:
        out[member.name] = nullptr;
        break;
    }
  }
  return out;
}

Value Describe(const vllm::entrypoints::EngineParams& p) {
  auto text = [](const std::optional<std::string>& s) { return s ? Value(*s) : Value(nullptr); };
  Value out = Value::object();
  out["model_path"] = text(p.model_path);
  out["tokenizer_config_path"] = text(p.tokenizer_config_path);
  out["block_size"] = p.block_size;
  out["num_blocks"] = p.num_blocks;
  out["max_model_len"] = p.max_model_len;
  out["max_num_seqs"] = p.max_num_seqs;
  out["tool_parser"] = text(p.tool_parser);
  out["reasoning_parser"] = text(p.reasoning_parser);
  out["speculative_config"] = text(p.speculative_config);
  out["enable_prefix_caching"] = p.enable_prefix_caching;
  out["max_num_batched_tokens"] = p.max_num_batched_tokens;
  out["scheduling_policy"] = text(p.scheduling_policy);
  out["kv_transfer_config"] = text(p.kv_transfer_config);
  out["enable_jump_forward"] = p.enable_jump_forward;
  out["device"] = p.device;
  out["gpu_memory_utilization"] = p.gpu_memory_utilization_value();
  out["kv_cache_memory_bytes"] = p.kv_cache_memory_bytes;
  out["gpu_memory_utilization_is_explicit"] = p.gpu_memory_utilization_is_explicit();
  return out;
}

vllm::v1::KVCacheConfig ProbeConfig(const Value* probe) {
  int64_t layers = 2, heads = 2, head_size = 64, block_size = 16;
  std::string dtype = "float32";
  if (probe != nullptr) {
    auto need = [&](const char* name) -> const Value& {
      const Value* v = Find(*probe, name);
      if (v == nullptr) throw std::invalid_argument(std::string("a probe needs '") + name + "'");
      return *v;
    };
    auto integer = [&](const char* name) {
      const Value& v = need(name);
      if (!v.is_number_integer()) throw std::invalid_argument(std::string("probe.") + name + " must be an int");
      return v.get<int64_t>();
    };
    layers = integer("layers");
    heads = integer("num_kv_heads");
    head_size = integer("head_size");
    block_size = integer("block_size");
    const Value& d = need("dtype");
    if (!d.is_string()) throw std::invalid_argument("probe.dtype must be a dtype name");
    dtype = d.get<std::string>();
    static const std::vector<std::string> known = {"float16", "bfloat16", "float32", "uint8"};
    if (std::find(known.begin(), known.end(), dtype) == known.end())
      throw std::invalid_argument("probe.dtype " + vllm::entrypoints::PyJsonRepr(d) + " is not one of " +
                                  "float16, bfloat16, float32, uint8");
  }
  auto spec = vllm::v1::MakeSpec<vllm::v1::FullAttentionSpec>(block_size, heads, head_size,
                                                                vllm::v1::DTypeByName(dtype));
  std::vector<std::string> names;
  for (int64_t i = 0; i < layers; ++i) names.push_back("layer" + std::to_string(i));
  vllm::v1::KVCacheConfig config;
  config.kv_cache_groups.emplace_back(names, spec);
  config.kv_cache_groups.back().Validate();
  return config;
}

}  // namespace gates::capi
