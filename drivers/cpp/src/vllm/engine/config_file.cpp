// See include/vllm/entrypoints/config_file.h. Messages as impl/entrypoints/config_file.py.
#include "vllm/entrypoints/config_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "vllm/entrypoints/model_loader.h"
#include "vllm/v1/str_repr.h"

namespace vllm::entrypoints {

namespace {

const std::vector<std::string>& WholeFields() {
  static const std::vector<std::string> fields = {
      "num_hidden_layers",     "num_attention_heads",    "num_key_value_heads", "head_dim",
      "hidden_size",           "kv_lora_rank",           "qk_rope_head_dim",    "sliding_window",
      "sliding_window_pattern", "full_attention_interval", "linear_num_key_heads", "linear_num_value_heads",
      "linear_key_head_dim",   "linear_value_head_dim",  "linear_conv_kernel_dim",
  };
  return fields;
}

std::string Kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a named pipe";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The byte offset of the first invalid UTF-8 sequence, or -1.
long InvalidUtf8At(const std::string& data) {
  const auto* s = reinterpret_cast<const unsigned char*>(data.data());
  const size_t n = data.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (extra < 0 || (extra == 1 && c < 0xC2)) return static_cast<long>(i);
    for (int k = 1; k <= extra; ++k) {
      if (i + static_cast<size_t>(k) >= n || (s[i + k] & 0xC0) != 0x80) return static_cast<long>(i);
    }
    i += static_cast<size_t>(extra) + 1;
  }
  return -1;
}

bool NestsDeeperThan(const std::string& text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

void Whole(const Json& cfg, const std::string& name, const std::string& path, int64_t maximum = kInt32Max) {
  const Json* value = JsonGet(cfg, name);
  if (value == nullptr) return;
  int64_t v = 0;
  if (value->is_boolean() || JsonInt(*value, &v) != JsonIntKind::kFits || v < 1 || v > maximum) {
    throw ConfigError(path + ": '" + name + "' must be a JSON integer from 1 to " + std::to_string(maximum) +
                      ", got " + vllm::v1::Shown(PyJsonRepr(*value)));
  }
}

}  // namespace

const std::vector<std::string>& MaxLengthKeys() {
  static const std::vector<std::string> keys = {
      "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
      "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len",
  };
  return keys;
}

Json ReadConfigJson(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw ConfigError(path + ": cannot read the model config: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw ConfigError(path + " is " + Kind(st.st_mode) + "; the model config must be a regular file (a config.json)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot read the model config: " + std::strerror(errno));
  std::string data(kMaxConfigBytes + 1, '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(in.gcount()));
  if (data.size() > kMaxConfigBytes) {
    throw ConfigError(path + " is larger than " + std::to_string(kMaxConfigBytes >> 20) +
                      " MiB; a config.json is a few kilobytes");
  }
  if (const long at = InvalidUtf8At(data); at >= 0) {
    throw ConfigError(path + " is not UTF-8 text (invalid utf-8 at byte " + std::to_string(at) +
                      "); the model config must be a JSON file");
  }
  if (NestsDeeperThan(data, kMaxConfigDepth)) {
    throw ConfigError(path + ": JSON nested more than " + std::to_string(kMaxConfigDepth) +
                      " deep; a model config nests a few levels");
  }
  // Refuse a key given twice in one object (JSON readers disagree on which one wins).
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  Json::parser_callback_t refuse_duplicates = [&](int /*depth*/, nlohmann::json::parse_event_t event, Json& parsed) {
    if (event == nlohmann::json::parse_event_t::object_start) keys.emplace_back();
    if (event == nlohmann::json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == nlohmann::json::parse_event_t::key && !keys.empty() && duplicate.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!keys.back().insert(key).second) duplicate = key;
    }
    return true;
  };
  Json raw;
  try {
    raw = Json::parse(data, refuse_duplicates);
  } catch (const nlohmann::json::parse_error& err) {
    const size_t at = std::min(err.byte == 0 ? 0 : err.byte - 1, data.size());
    const size_t line = 1 + static_cast<size_t>(std::count(data.begin(), data.begin() + static_cast<long>(at), '\n'));
    const size_t line_start = data.rfind('\n', at == 0 ? 0 : at - 1);
    const size_t column = line_start == std::string::npos || at == 0 ? at + 1 : at - line_start;
    throw ConfigError(path + ": not valid JSON: " + err.what() + " (line " + std::to_string(line) + ", column " +
                      std::to_string(column) + ")");
  }
  if (!duplicate.empty()) {
    throw ConfigError(path + ": not valid JSON for a model config: the key " + vllm::v1::PyStrRepr(duplicate) +
                      " appears twice in one object");
  }
  if (!raw.is_object()) {
    throw ConfigError(path + ": expected a JSON object ({...}) at the top, got " + PyJsonTypeName(raw));
  }
  return raw;
}

void CheckConfigFields(const Json& cfg, const std::string& path) {
  using vllm::v1::Shown;
  if (const Json* value = JsonGet(cfg, "architectures")) {
    bool ok = value->is_array() && !value->empty();
    if (ok) {
      for (const Json& name : *value) ok = ok && name.is_string() && !name.get<std::string>().empty();
    }
    if (!ok) {
      throw ConfigError(path + ": 'architectures' must be a non-empty JSON list of class names (like "
                               "[\"LlamaForCausalLM\"]), got " + Shown(PyJsonRepr(*value)));
    }
  }
  if (const Json* value = JsonGet(cfg, "model_type"); value != nullptr && !value->is_string()) {
    throw ConfigError(path + ": 'model_type' must be a JSON string, got " + Shown(PyJsonRepr(*value)));
  }
  for (const std::string& name : WholeFields()) Whole(cfg, name, path);
  for (const std::string& name : MaxLengthKeys()) Whole(cfg, name, path);
  Whole(cfg, "num_hidden_layers", path, kMaxLayers);
  if (cfg.contains("use_sliding_window") && !cfg["use_sliding_window"].is_boolean()) {
    throw ConfigError(path + ": 'use_sliding_window' must be a JSON boolean (true or false, unquoted), got " +
                      Shown(PyJsonRepr(cfg["use_sliding_window"])));
  }
  if (const Json* types = JsonGet(cfg, "layer_types")) {
    bool ok = types->is_array();
    if (ok) {
      for (const Json& t : *types) ok = ok && t.is_string();
    }
    if (!ok) {
      throw ConfigError(path + ": 'layer_types' must be a JSON list of strings, got " + Shown(PyJsonRepr(*types)));
    }
  }
  for (const char* name : {"torch_dtype", "dtype"}) {
    if (const Json* value = JsonGet(cfg, name); value != nullptr && !value->is_string()) {
      throw ConfigError(path + ": '" + name + "' must be a JSON string such as \"bfloat16\", got " +
                        Shown(PyJsonRepr(*value)));
    }
  }
  const Json* rope = JsonGet(cfg, "rope_scaling");
  if (rope == nullptr) return;
  if (!rope->is_object()) {
    throw ConfigError(path + ": 'rope_scaling' must be a JSON object or null, got " + Shown(PyJsonRepr(*rope)));
  }
  const Json* kind = rope->contains("rope_type") ? &(*rope)["rope_type"]
                     : rope->contains("type")    ? &(*rope)["type"]
                                                 : nullptr;
  if (kind != nullptr && !kind->is_null() && !kind->is_string()) {
    throw ConfigError(path + ": 'rope_scaling.rope_type' must be a JSON string, got " + Shown(PyJsonRepr(*kind)));
  }
  if (rope->contains("factor")) {
    const Json& factor = (*rope)["factor"];
    const bool number = factor.is_number() && !factor.is_boolean();
    if (!number || !std::isfinite(factor.get<double>()) || factor.get<double>() <= 0) {
      throw ConfigError(path + ": 'rope_scaling.factor' must be a positive JSON number, got " +
                        Shown(PyJsonRepr(factor)));
    }
  }
  if (kind != nullptr && kind->is_string() && kind->get<std::string>() == "yarn") {
    Whole(*rope, "original_max_position_embeddings", path);
    if (JsonGet(*rope, "original_max_position_embeddings") == nullptr) {
      throw ConfigError(path + ": 'rope_scaling' of type yarn needs 'original_max_position_embeddings'");
    }
  }
}

}  // namespace vllm::entrypoints
