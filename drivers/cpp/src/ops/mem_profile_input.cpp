// See mem_profile_input.h. Refusals worded as build_profile.py and impl/worker/memory_snapshot.py.
#include "mem_profile_input.h"

#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "mem_yaml.h"
#include "vllm/v1/str_repr.h"

namespace gates::mem {

namespace {

const char* kSnapshotFixtures = "gates/rows/road_v1_mem/fixtures/snapshots/";
const std::vector<std::string> kPhases = {"before_create", "before_profile", "after_profile"};
const std::vector<std::string> kSnapshotFields = {"torch_peak", "free_memory", "total_memory", "torch_memory",
                                                  "timestamp"};
const std::vector<std::string> kOptionalSnapshotFields = {"torch_allocated"};  // absent: min(torch_peak, torch_memory)
const std::vector<std::string> kKvFields = {"num_layers", "block_size", "num_kv_heads", "head_size", "dtype"};

std::vector<std::string> Keys(const Value& mapping) {
  std::vector<std::string> keys;
  for (auto it = mapping.begin(); it != mapping.end(); ++it) keys.push_back(it.key());
  return keys;
}

bool SameKeys(const Value& mapping, const std::vector<std::string>& expected) {
  if (!mapping.is_object() || mapping.size() != expected.size()) return false;
  for (const std::string& key : expected) {
    if (!mapping.contains(key)) return false;
  }
  return true;
}

std::string PyList(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + vllm::v1::PyStrRepr(names[i]);
  return out + "]";
}

Value LoadFixture(const Value& name_value) {
  static const std::regex name_re("^[a-z0-9][a-z0-9-]*$");
  if (!name_value.is_string() || !std::regex_match(name_value.get<std::string>(), name_re)) {
    Refuse("fixture must be a name like 'phi4-gptq-a100-util015', got " + PyJsonRepr(name_value));
  }
  const std::string name = name_value.get<std::string>();
  const std::string path = kSnapshotFixtures + name + ".yaml";
  std::ifstream in(path);
  if (!in) {
    std::vector<std::string> known;
    if (DIR* dir = opendir(kSnapshotFixtures)) {
      while (const dirent* entry = readdir(dir)) {
        const std::string file = entry->d_name;
        if (file.size() > 5 && file.substr(file.size() - 5) == ".yaml") known.push_back(file.substr(0, file.size() - 5));
      }
      closedir(dir);
    }
    std::sort(known.begin(), known.end());
    std::string listed;
    for (size_t i = 0; i < known.size(); ++i) listed += (i ? ", " : "") + known[i];
    Refuse("fixture " + vllm::v1::PyStrRepr(name) + ": no file " + path + " (known: " + listed + ")");
  }
  std::stringstream text;
  text << in.rdbuf();
  Value data = ParseYamlMapping(text.str(), path);
  if (!data.is_object()) Refuse("fixture " + vllm::v1::PyStrRepr(name) + ": " + path + " must hold a mapping");
  return data;
}

// MemorySnapshot(device=..., **fields), its fields read with the dataclass's refusals.
vllm::worker::MemorySnapshot Snapshot(const Value& device, const Value& fields) {
  if (!device.is_string() || device.get<std::string>().empty()) {
    Refuse("MemorySnapshot.device must be a non-empty device name such as 'cuda:0', got " + PyJsonRepr(device));
  }
  vllm::worker::MemorySnapshot snapshot;
  snapshot.device = device.get<std::string>();
  snapshot.torch_peak = ReadInt("MemorySnapshot", "torch_peak", fields["torch_peak"], 0);
  snapshot.free_memory = ReadInt("MemorySnapshot", "free_memory", fields["free_memory"], 0);
  snapshot.total_memory = ReadInt("MemorySnapshot", "total_memory", fields["total_memory"], 0);
  snapshot.torch_memory = ReadInt("MemorySnapshot", "torch_memory", fields["torch_memory"], 0);
  if (fields.contains("torch_allocated")) {
    snapshot.torch_allocated = ReadInt("MemorySnapshot", "torch_allocated", fields["torch_allocated"], 0);
  }
  const Value& timestamp = fields["timestamp"];
  if (timestamp.is_boolean() || !timestamp.is_number()) {
    Refuse("MemorySnapshot.timestamp must be a finite number of seconds, got " + PyJsonRepr(timestamp));
  }
  snapshot.timestamp = timestamp.get<double>();
  snapshot.Validate();
  return snapshot;
}

}  // namespace

Value ResolveProfileInput(const Value& data) {
  if (!data.is_object()) Refuse("a profile case input must be a mapping, got " + PyJsonTypeName(data));
  Value fields = data;
  if (fields.contains("fixture")) {
    Value loaded = LoadFixture(fields["fixture"]);
    fields.erase("fixture");
    for (auto it = fields.begin(); it != fields.end(); ++it) loaded[it.key()] = it.value();
    fields = loaded;
  }
  static const std::set<std::string> required = {"device", "gpu_memory_utilization", "weights_memory", "snapshots"};
  static const std::set<std::string> optional = {"kv", "kv_cache_memory_bytes", "profiled", "source", "logged"};
  std::vector<std::string> unknown, missing;
  for (const std::string& key : Keys(fields)) {
    if (!required.count(key) && !optional.count(key)) unknown.push_back(key);
  }
  for (const std::string& key : required) {
    if (!fields.contains(key)) missing.push_back(key);
  }
  if (!unknown.empty() || !missing.empty()) {
    Refuse("profile case input: unknown keys " + PySortedNames(unknown) + ", missing keys " + PySortedNames(missing));
  }
  const Value& snapshots = fields["snapshots"];
  if (!SameKeys(snapshots, kPhases)) {
    Refuse("profile case input: snapshots must have exactly " + PyList(kPhases) + ", got " + PyJsonRepr(snapshots));
  }
  for (const std::string& phase : kPhases) {
    const Value& snapshot = snapshots[phase];
    bool known = snapshot.is_object();
    size_t optional_present = 0;
    for (const std::string& key : kOptionalSnapshotFields) optional_present += known && snapshot.contains(key);
    if (!known || snapshot.size() != kSnapshotFields.size() + optional_present ||
        !std::all_of(kSnapshotFields.begin(), kSnapshotFields.end(),
                     [&](const std::string& key) { return snapshot.contains(key); })) {
      Refuse("profile case input: snapshots." + phase + " must have exactly " + PyList(kSnapshotFields) +
             ", optionally " + PyList(kOptionalSnapshotFields) + ", got " + PyJsonRepr(snapshot));
    }
  }
  if (fields.contains("kv") && !SameKeys(fields["kv"], kKvFields)) {
    Refuse("profile case input: kv must have exactly " + PyList(kKvFields) + ", got " + PyJsonRepr(fields["kv"]));
  }
  return fields;
}

vllm::worker::MemoryProfilingResult ProfilingResult(const Value& fields) {
  vllm::worker::MemoryProfilingResult result;
  const Value& snapshots = fields["snapshots"];
  result.before_create = Snapshot(fields["device"], snapshots["before_create"]);
  result.before_profile = Snapshot(fields["device"], snapshots["before_profile"]);
  result.after_profile = Snapshot(fields["device"], snapshots["after_profile"]);
  result.weights_memory = ReadInt("MemoryProfilingResult", "weights_memory", fields["weights_memory"], 0);
  result.Validate();
  return result;
}

vllm::v1::KVCacheConfig KVProbe(const Value& kv) {
  const Value& dtype = kv["dtype"];
  if (!dtype.is_string() || vllm::v1::FindDType(dtype.get<std::string>()) == nullptr) {
    Refuse("module 'torch' has no attribute " + PyJsonRepr(dtype) + " (AttributeError)");
  }
  const std::string owner = "FullAttentionSpec";
  auto spec = vllm::v1::MakeSpec<vllm::v1::FullAttentionSpec>(
      ReadInt(owner, "block_size", kv["block_size"], 1), ReadInt(owner, "num_kv_heads", kv["num_kv_heads"], 1),
      ReadInt(owner, "head_size", kv["head_size"], 1), *vllm::v1::FindDType(dtype.get<std::string>()));
  const Value& layers = kv["num_layers"];
  int64_t count = 0;
  if (layers.is_boolean()) {
    count = layers.get<bool>() ? 1 : 0;
  } else if (vllm::entrypoints::JsonInt(layers, &count) != vllm::entrypoints::JsonIntKind::kFits) {
    Refuse("'" + PyJsonTypeName(layers) + "' object cannot be interpreted as an integer (num_layers)");
  }
  std::vector<std::string> names;
  for (int64_t i = 0; i < count; ++i) names.push_back("model.layers." + std::to_string(i) + ".self_attn");
  vllm::v1::KVCacheConfig config;
  config.kv_cache_groups.emplace_back(names, spec);
  config.kv_cache_groups.back().Validate();
  return config;
}

}  // namespace gates::mem
