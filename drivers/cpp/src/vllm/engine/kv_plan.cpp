// See include/vllm/entrypoints/kv_plan.h. Steps and messages as impl/entrypoints/kv_plan.py.
#include "vllm/entrypoints/kv_plan.h"

#include <algorithm>
#include <stdexcept>

#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/config_file.h"
#include "vllm/entrypoints/model_geometry.h"
#include "vllm/entrypoints/model_loader.h"
#include "vllm/v1/checked_math.h"
#include "vllm/v1/core/kv_pool_groups.h"
#include "vllm/v1/kv_cache_interface.h"
#include "vllm/v1/str_repr.h"

namespace vllm::entrypoints {

ArgParser BuildKvPlanParser() {
  ArgParser parser("kv-plan");
  parser.add({"--model-config", "model_config", "PATH", false, nullptr, "", {}, true, ArgValue{}});
  parser.add({"--tensor-parallel-size", "tensor_parallel_size", "N", false,
              BoundedIntArg(kInt32Max, "a count kv-plan takes is at most a 32-bit int"), "integer", {}, false,
              ArgValue{int64_t{1}}});
  std::vector<std::string> dtypes = {"auto"};
  dtypes.insert(dtypes.end(), ModelDTypeNames().begin(), ModelDTypeNames().end());
  parser.add({"--dtype", "dtype", "", false, nullptr, "", dtypes, false, ArgValue{std::string("auto")}});
  parser.add({"--kv-cache-dtype", "kv_cache_dtype", "DTYPE", false, nullptr, "", KVCacheDTypes(), false,
              ArgValue{std::string("auto")}});
  parser.add({"--max-num-batched-tokens", "max_num_batched_tokens", "T", false, MemberIntArg("max_num_batched_tokens"),
              "integer", {}, false, ArgValue{int64_t{0}}});
  parser.add({"--json", "json", "", true, nullptr, "", {}, false, ArgValue{false}});
  AddSizingArguments(parser);
  return parser;
}

namespace {

std::string Text(const Namespace& args, const std::string& dest) {
  const ArgValue* value = args.find(dest);
  return value != nullptr && std::holds_alternative<std::string>(*value) ? std::get<std::string>(*value) : "";
}

int64_t Int(const Namespace& args, const std::string& dest) {
  const ArgValue* value = args.find(dest);
  return value != nullptr && std::holds_alternative<int64_t>(*value) ? std::get<int64_t>(*value) : 0;
}

// The dtype the model runs in: an explicit --dtype as given (the geometry refuses float16 for Gemma-2/3), or for
// auto vLLM's resolution of the config's torch_dtype (or dtype); refusals mention --dtype (MEM-2.11).
vllm::v1::DType ModelDType(const std::string& flag, const Json& cfg, const std::string& path) {
  if (flag != "auto") return vllm::v1::DTypeByName(flag);
  const std::string key = JsonGet(cfg, "torch_dtype") != nullptr ? "torch_dtype" : "dtype";
  const Json* name = JsonGet(cfg, key);
  const std::string choices = "float16|bfloat16|float32";
  if (name == nullptr) {
    throw ConfigError(path + " has no 'torch_dtype' (or 'dtype') field naming the model's dtype; give it with --dtype " +
                      choices);
  }
  const std::string text = name->is_string() ? name->get<std::string>() : "";
  const auto& names = ModelDTypeNames();
  if (std::find(names.begin(), names.end(), text) == names.end()) {
    throw ConfigError(path + ": '" + key + "' must be one of ['float16', 'bfloat16', 'float32'], got " +
                      PyJsonRepr(*name) + "; or give the model's dtype with --dtype " + choices);
  }
  return vllm::v1::DTypeByName(AutoRunDTypeName(cfg, text));
}

// --max-model-len, or the model's own limit when 0; a length above the model's is refused, as vLLM does.
int64_t MaxModelLen(int64_t requested, const Json& cfg, const std::string& path) {
  const std::optional<ModelLength> derived = DerivedMaxModelLen(cfg);
  if (!derived.has_value()) {
    if (requested) return requested;
    std::string keys;
    for (const std::string& key : MaxLengthKeys()) keys += (keys.empty() ? "" : ", ") + key;
    throw ConfigError(path + " has none of " + keys + ", which give the model's longest sequence; give --max-model-len");
  }
  if (!requested) {
    if (derived->truncated() < 1) {
      throw ConfigError(path + ": the model's longest sequence comes to " + derived->repr() + " tokens (" +
                        derived->key + ", rope_scaling); give --max-model-len");
    }
    return derived->truncated();
  }
  const Json* model_max_length = JsonGet(cfg, "model_max_length");
  const bool within_model_max = model_max_length != nullptr && model_max_length->is_number() &&
                                static_cast<double>(requested) <= model_max_length->get<double>();
  if (static_cast<double>(requested) > derived->value() && !within_model_max) {
    throw FlagError("--max-model-len " + std::to_string(requested) + " is greater than the derived max_model_len (" +
                    derived->key + "=" + derived->repr() + " or model_max_length=" +
                    (model_max_length ? PyJsonRepr(*model_max_length) : "None") + " in " + path +
                    "), which vLLM refuses; give at most " + std::to_string(derived->truncated()) +
                    ", or 0 for the model's own length");
  }
  return requested;
}

// vLLM 0.33.0's model of the pool: the override's block count, else the byte budget, else the memory the port's
// pool takes (no memory profile here), so the two carve up one budget.
KvPlanVllm VllmSection(const vllm::v1::KVCacheConfig& probe, const EngineParams& params, const KvPlan& port,
                       int64_t batched) {
  KvPlanVllm section;
  if (const auto reason = vllm::v1::UnmodelledReason(probe)) {
    section.reason = *reason;
    return section;
  }
  std::optional<int64_t> available, override_blocks;
  if (port.decided_by == "num_blocks") {
    section.decided_by = "num_blocks";
    override_blocks = port.num_blocks;
  } else if (port.decided_by == "kv_cache_memory_bytes") {
    section.decided_by = "kv_cache_memory_bytes";
    available = params.kv_cache_memory_bytes;
  } else {
    section.decided_by = "port_pool_memory";
    available = vllm::v1::CheckedMul(port.num_blocks, port.bytes_per_block, "KV bytes");
  }
  const vllm::v1::VllmPool pool =
      vllm::v1::BuildVllmPool(probe, port.max_model_len, batched, available, override_blocks);
  section.computed = true;
  section.bytes_per_block = pool.bytes_per_block;
  section.num_blocks = pool.num_blocks;
  section.kv_cache_tokens = pool.kv_cache_tokens();
  section.max_concurrency = pool.max_concurrency();
  section.available_memory_bytes = available;
  section.blocks_per_request = pool.blocks_per_request();
  section.max_in_flight_tokens = pool.max_in_flight_tokens;
  for (size_t index = 0; index < pool.groups.size(); ++index) {
    const vllm::v1::PoolGroup& group = pool.groups[index];
    const auto* sliding = dynamic_cast<const vllm::v1::SlidingWindowSpec*>(group.spec.get());
    section.groups.push_back({static_cast<int64_t>(index), group.spec->type_name(),
                              static_cast<int64_t>(group.layer_names.size()), group.spec->page_size_bytes(),
                              group.bytes_per_block(), group.blocks_per_request,
                              sliding ? std::optional<int64_t>(sliding->sliding_window) : std::nullopt});
  }
  section.agrees_with_port = pool.bytes_per_block == port.bytes_per_block && pool.num_blocks == port.num_blocks &&
                             section.kv_cache_tokens == port.kv_cache_tokens && port.max_concurrency.has_value() &&
                             section.max_concurrency == *port.max_concurrency;
  return section;
}

}  // namespace

KvPlan Plan(const Namespace& args) {
  const EngineParams params = CheckedEngineParams(args);
  const std::string path = Text(args, "model_config");
  const Json cfg = LoadModelConfig(path);
  CheckConfigFields(cfg, path);
  const int64_t tp = Int(args, "tensor_parallel_size");
  Reworded("--tensor-parallel-size", "ProbeRequest.tensor_parallel_size", [&] {
    ProbeRequest alone;
    alone.tensor_parallel_size = tp;
    alone.Validate();
  });
  ProbeRequest request;
  request.tensor_parallel_size = tp;
  request.dtype = ModelDType(Text(args, "dtype"), cfg, path);
  request.kv_cache_dtype = Text(args, "kv_cache_dtype");
  request.block_size = params.block_size;
  request.Validate();
  vllm::v1::KVCacheConfig probe;
  try {
    probe = ProbeKVCacheConfig(cfg, request);
  } catch (const std::invalid_argument& err) {
    throw ConfigError(path + ": " + err.what());
  }
  const int64_t max_len = MaxModelLen(params.max_model_len, cfg, path);
  std::optional<int64_t> batched;
  if (Int(args, "max_num_batched_tokens") != 0) batched = Int(args, "max_num_batched_tokens");
  const PoolSizing sizing = LoadedEngine::ResolveKVPool(params, probe);
  const int64_t bpb = vllm::v1::KVBytesPerBlock(probe);

  KvPlan plan;
  int64_t request_bytes = 0;
  for (size_t index = 0; index < probe.kv_cache_groups.size(); ++index) {
    const auto& group = probe.kv_cache_groups[index];
    const auto& spec = *group.kv_cache_spec;
    const auto layers = static_cast<int64_t>(group.layer_names.size());
    const bool per_block = dynamic_cast<const vllm::v1::AttentionSpec*>(&spec) != nullptr;
    if (per_block) {
      request_bytes = vllm::v1::CheckedAdd(
          request_bytes, vllm::v1::CheckedMul(layers, spec.max_memory_usage_bytes(max_len, batched), "KV bytes"),
          "KV bytes");
    }
    const int64_t group_bytes = vllm::v1::CheckedMul(spec.page_size_bytes(), layers, "KV bytes");
    plan.groups.push_back({static_cast<int64_t>(index), spec.type_name(), layers, spec.page_size_bytes(),
                           per_block ? group_bytes : 0, per_block ? 0 : group_bytes});
  }
  const int64_t blocks_per_request = bpb ? vllm::v1::CeilDiv(request_bytes, bpb) : 0;
  const Json* architectures = JsonGet(cfg, "architectures");
  const Json* model_type = JsonGet(cfg, "model_type");
  plan.model_config = path;
  plan.architecture = architectures != nullptr && architectures->is_array() && !architectures->empty()
                          ? (*architectures)[0].get<std::string>()
                          : (model_type != nullptr && model_type->is_string() ? model_type->get<std::string>() : "None");
  plan.tensor_parallel_size = request.tensor_parallel_size;
  plan.dtype = request.dtype->name;
  plan.kv_cache_dtype = request.kv_cache_dtype;
  plan.block_size = params.block_size;
  plan.bytes_per_block = bpb;
  plan.num_blocks = sizing.num_blocks;
  plan.decided_by = KnobName(sizing.decided_by);
  plan.kv_cache_memory_bytes = params.kv_cache_memory_bytes;
  plan.kv_cache_tokens = vllm::v1::CheckedMul(plan.num_blocks, params.block_size, "KV tokens");
  plan.max_model_len = max_len;
  if (blocks_per_request) {
    plan.max_concurrency = static_cast<double>(plan.num_blocks) / static_cast<double>(blocks_per_request);
  }
  if (sizing.warning.has_value()) plan.warnings.push_back(*sizing.warning);
  plan.vllm = VllmSection(probe, params, plan, batched.value_or(max_len));
  return plan;
}

}  // namespace vllm::entrypoints
