// See include/vllm/entrypoints/cli_args.h. Messages as impl/entrypoints/cli_args.py.
#include "vllm/entrypoints/cli_args.h"

#include <cstdlib>
#include <regex>

#include "vllm/entrypoints/sizes.h"
#include "vllm/v1/float_repr.h"
#include "vllm/v1/str_repr.h"

namespace vllm::entrypoints {

namespace {
constexpr size_t kMaxSizeText = 64;
const char* kKvMemoryFlag = "--kv-cache-memory";
const char* kKvMemoryAlias = "--kv-cache-memory-bytes";

std::string ShownText(const std::string& text) { return vllm::v1::Shown(vllm::v1::PyStrRepr(text)); }

int64_t AsInt(const ArgValue& value) { return std::get<int64_t>(value); }
}  // namespace

std::string FlagOfField(const std::string& field) {
  if (field == "block_size") return "--block-size";
  if (field == "num_blocks") return "--num-blocks";
  if (field == "kv_cache_memory_bytes") return kKvMemoryFlag;
  if (field == "gpu_memory_utilization") return "--gpu-memory-utilization";
  if (field == "max_model_len") return "--max-model-len";
  if (field == "max_num_batched_tokens") return "--max-num-batched-tokens";
  return "";
}

std::function<ArgValue(const std::string&)> BoundedIntArg(int64_t maximum, const std::string& what) {
  return [maximum, what](const std::string& text) -> ArgValue {
    static const std::regex integer("-?[0-9]+");
    if (!std::regex_match(text, integer)) {
      throw ArgumentTypeError("expected an integer, got " + ShownText(text) +
                              " (accepted: ASCII digits, an optional leading '-')");
    }
    std::string digits = text.substr(text.find_first_not_of('-'));
    const size_t first = digits.find_first_not_of('0');
    digits = first == std::string::npos ? "" : digits.substr(first);
    const std::string max_text = std::to_string(maximum);
    const bool too_long = digits.size() > max_text.size();
    const bool too_big = !too_long && digits.size() == max_text.size() && digits > max_text;
    if (too_long || too_big) {
      throw ArgumentTypeError(ShownText(text) + " is out of range: at most " + max_text + " (" + what + ")");
    }
    const int64_t magnitude = digits.empty() ? 0 : std::strtoll(digits.c_str(), nullptr, 10);
    return text[0] == '-' ? -magnitude : magnitude;
  };
}

std::function<ArgValue(const std::string&)> MemberIntArg(const std::string& member) {
  const CIntMember& m = CIntMemberOf(member);
  return BoundedIntArg(m.maximum, "vllm_model_params." + member + " is an " + m.ctype);
}

ArgValue DecimalArg(const std::string& text) {
  static const std::regex decimal(R"(-?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+))");
  if (!std::regex_match(text, decimal)) {
    throw ArgumentTypeError("expected a number such as 0.9, got " + ShownText(text) +
                            " (accepted: ASCII digits, an optional leading '-', one '.')");
  }
  return std::strtod(text.c_str(), nullptr);
}

std::function<ArgValue(const std::string&)> SizeArg(const std::string& flag) {
  return [flag](const std::string& text) -> ArgValue {
    const std::string too_big = "at most " + std::to_string(kInt64Max) +
                                " bytes (8 EiB): vllm_model_params.kv_cache_memory_bytes is an int64_t";
    if (vllm::v1::DecodeUtf8(text).size() > kMaxSizeText) {
      throw ArgumentTypeError(ShownText(text) + " is too long for a size; accepted: " + too_big);
    }
    ByteSize size;
    try {
      size = ParseSize(text, flag);
    } catch (const std::invalid_argument& err) {
      std::string reason = err.what();
      const std::string prefix = flag + ": ";
      if (reason.rfind(prefix, 0) == 0) reason = reason.substr(prefix.size());
      throw ArgumentTypeError(reason);
    }
    const std::optional<int64_t> bytes = size.as_int64();
    if (!bytes.has_value()) {
      throw ArgumentTypeError(ShownText(text) + " is " + vllm::v1::PyFormatG(size.as_double(), 3) +
                              " bytes, out of range: " + too_big);
    }
    return *bytes;
  };
}

ArgParser& AddSizingArguments(ArgParser& parser) {
  parser.add({"--block-size", "block_size", "N", false, MemberIntArg("block_size"), "integer", {}, false,
              ArgValue{int64_t{32}}});
  parser.add({"--num-blocks", "num_blocks", "N", false, MemberIntArg("num_blocks"), "integer", {}, false,
              ArgValue{int64_t{0}}});
  parser.add({kKvMemoryFlag, "kv_cache_memory_bytes", "SIZE", false, SizeArg(kKvMemoryFlag), "size", {}, false,
              ArgValue{int64_t{0}}});
  parser.add({kKvMemoryAlias, "kv_cache_memory_bytes", "SIZE", false, SizeArg(kKvMemoryAlias), "size", {}, false,
              std::nullopt});
  parser.add({"--gpu-memory-utilization", "gpu_memory_utilization", "F", false, DecimalArg, "decimal_arg", {},
              false, ArgValue{}});
  parser.add({"--max-model-len", "max_model_len", "L", false, MemberIntArg("max_model_len"), "integer", {}, false,
              ArgValue{int64_t{0}}});
  return parser;
}

namespace {

// The flags that are EngineParams fields, in namespace order; an unset utilization is left out.
std::vector<std::pair<std::string, ArgValue>> ParamValues(const Namespace& args) {
  static const char* fields[] = {"block_size", "num_blocks", "max_model_len", "max_num_batched_tokens",
                                 "gpu_memory_utilization", "kv_cache_memory_bytes"};
  std::vector<std::pair<std::string, ArgValue>> values;
  for (const auto& [dest, value] : args.items()) {
    bool is_field = false;
    for (const char* field : fields) is_field = is_field || dest == field;
    if (!is_field) continue;
    if (dest == "gpu_memory_utilization" && std::holds_alternative<std::monostate>(value)) continue;
    values.emplace_back(dest, value);
  }
  return values;
}

void SetField(EngineParams& params, const std::string& name, const ArgValue& value) {
  if (name == "gpu_memory_utilization") {
    params.gpu_memory_utilization = std::get<double>(value);
  } else if (name == "block_size") {
    params.block_size = AsInt(value);
  } else if (name == "num_blocks") {
    params.num_blocks = AsInt(value);
  } else if (name == "max_model_len") {
    params.max_model_len = AsInt(value);
  } else if (name == "max_num_batched_tokens") {
    params.max_num_batched_tokens = AsInt(value);
  } else if (name == "kv_cache_memory_bytes") {
    params.kv_cache_memory_bytes = AsInt(value);
  }
}

}  // namespace

EngineParams EngineParamsFromArgs(const Namespace& args) {
  EngineParams params;
  for (const auto& [name, value] : ParamValues(args)) SetField(params, name, value);
  params.Validate();
  return params;
}

void Reworded(const std::string& flag, const std::string& prefix, const std::function<void()>& make) {
  try {
    make();
  } catch (const std::invalid_argument& err) {
    std::string reason = err.what();
    if (reason.rfind(prefix, 0) == 0) {
      reason = reason.substr(prefix.size());
      reason = reason.substr(std::min(reason.size(), reason.find_first_not_of(" =")));
    }
    throw FlagError(flag + " " + reason);
  }
}

EngineParams CheckedEngineParams(const Namespace& args) {
  for (const auto& [name, value] : ParamValues(args)) {
    const std::string flag = FlagOfField(name);
    if (flag.empty()) continue;
    Reworded(flag, "EngineParams." + name, [&, name = name, value = value] {
      EngineParams alone;
      SetField(alone, name, value);
      alone.Validate();
    });
  }
  return EngineParamsFromArgs(args);
}

}  // namespace vllm::entrypoints
