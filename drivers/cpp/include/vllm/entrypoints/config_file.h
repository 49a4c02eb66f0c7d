// A model's config.json read with limits, and the fields KV sizing reads checked (MEM-2.10, MEM-2.12; issue 14).
//
// Ported from impl/entrypoints/config_file.py. Limits that fail fast, before any layer is built: a regular file of
// at most 16 MiB, UTF-8 JSON (no NaN or Infinity, no key twice in one object) nested at most 64 deep, at most
// 10000 decoder layers. The fields kv-plan reads keep their JSON types: whole numbers are JSON integers, flags are
// JSON booleans. Every refusal is a ConfigError naming the file, and the field when one is at fault.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "vllm/entrypoints/json_repr.h"

namespace vllm::entrypoints {

inline constexpr size_t kMaxConfigBytes = 16u << 20;
inline constexpr int kMaxConfigDepth = 64;
inline constexpr int64_t kMaxLayers = 10000;

struct ConfigError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Where vLLM looks for a model's longest sequence (vllm/config/model.py, _get_and_verify_max_len).
const std::vector<std::string>& MaxLengthKeys();

// The JSON object of a config.json at `path`, read within the limits above.
Json ReadConfigJson(const std::string& path);

// Refuse a field KV sizing reads that has the wrong JSON type or an impossible value.
void CheckConfigFields(const Json& cfg, const std::string& path);

}  // namespace vllm::entrypoints
