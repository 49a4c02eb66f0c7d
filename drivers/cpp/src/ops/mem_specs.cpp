// See mem_specs.h.
#include "mem_specs.h"

#include <set>

#include "vllm/v1/str_repr.h"

namespace gates::mem {

using namespace vllm::v1;

namespace {

// The keyword arguments each spec class takes (the Python dataclass fields); the required ones have no default.
struct ClassFields {
  std::vector<std::string> required_positional;
  std::vector<std::string> required_keyword;
  std::vector<std::string> optional;
};

const ClassFields& FieldsOf(const std::string& kind) {
  static const ClassFields full{{"block_size"}, {"num_kv_heads", "head_size", "dtype"},
                                {"kv_quant_mode", "page_size_padded", "head_size_v", "sliding_window",
                                 "attention_chunk_size"}};
  static const ClassFields mla{{"block_size"}, {"num_kv_heads", "head_size", "dtype"},
                               {"kv_quant_mode", "page_size_padded", "head_size_v", "sliding_window",
                                "attention_chunk_size", "cache_dtype_str"}};
  static const ClassFields sliding{{"block_size"}, {"num_kv_heads", "head_size", "dtype", "sliding_window"},
                                   {"kv_quant_mode", "page_size_padded"}};
  static const ClassFields chunked{{"block_size"}, {"num_kv_heads", "head_size", "dtype", "attention_chunk_size"},
                                   {"kv_quant_mode", "page_size_padded"}};
  static const ClassFields mamba{{"block_size"}, {"shapes", "dtypes"},
                                 {"page_size_padded", "mamba_type", "mamba_cache_mode", "num_speculative_blocks",
                                  "num_prefill_checkpoint_blocks"}};
  if (kind == "full") return full;
  if (kind == "mla") return mla;
  if (kind == "sliding_window") return sliding;
  if (kind == "chunked_local") return chunked;
  return mamba;
}

std::string ClassName(const std::string& kind) {
  if (kind == "full") return "FullAttentionSpec";
  if (kind == "mla") return "MLAAttentionSpec";
  if (kind == "sliding_window") return "SlidingWindowSpec";
  if (kind == "chunked_local") return "ChunkedLocalAttentionSpec";
  return "MambaSpec";
}

// "'a'", "'a' and 'b'", "'a', 'b' and 'c'" as Python's missing-argument TypeError lists names.
std::string NameList(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += i + 1 == names.size() ? (names.size() > 2 ? ", and " : " and ") : ", ";
    out += "'" + names[i] + "'";
  }
  return out;
}

DType DTypeOf(const Value& name) {
  if (!name.is_string() || FindDType(name.get<std::string>()) == nullptr) {
    Refuse("unknown dtype " + PyJsonRepr(name) + " (KeyError)");
  }
  return *FindDType(name.get<std::string>());
}

KVQuantMode QuantModeOf(const Value& name) {
  std::optional<KVQuantMode> mode;
  if (name.is_string()) mode = KVQuantModeByName(name.get<std::string>());
  if (!mode.has_value()) Refuse("unknown KVQuantMode " + PyJsonRepr(name) + " (KeyError)");
  return *mode;
}

const Value& Get(const Value& data, const std::string& name) {
  static const Value null_value;
  const Value* member = Member(data, name);
  return member ? *member : null_value;
}

std::string MambaRepr(const MambaSpec& spec) {
  std::string shapes = "(";
  for (size_t i = 0; i < spec.shapes.size(); ++i) {
    std::string shape = "(";
    for (size_t j = 0; j < spec.shapes[i].size(); ++j) shape += (j ? ", " : "") + std::to_string(spec.shapes[i][j]);
    shape += spec.shapes[i].size() == 1 ? ",)" : ")";
    shapes += (i ? ", " : "") + shape;
  }
  shapes += spec.shapes.size() == 1 ? ",)" : ")";
  std::string dtypes = "(";
  for (size_t i = 0; i < spec.dtypes.size(); ++i) dtypes += (i ? ", " : "") + spec.dtypes[i].torch_str();
  dtypes += spec.dtypes.size() == 1 ? ",)" : ")";
  return "MambaSpec(block_size=" + std::to_string(spec.block_size) + ", shapes=" + shapes + ", dtypes=" + dtypes +
         ", page_size_padded=" + (spec.page_size_padded ? std::to_string(*spec.page_size_padded) : "None") +
         ", mamba_type=" + PyStrRepr(spec.mamba_type) + ", mamba_cache_mode=" + PyStrRepr(spec.mamba_cache_mode) +
         ", num_speculative_blocks=" + std::to_string(spec.num_speculative_blocks) +
         ", num_prefill_checkpoint_blocks=" + std::to_string(spec.num_prefill_checkpoint_blocks) + ")";
}

}  // namespace

std::shared_ptr<KVCacheSpec> ImplSpec(const Value& data) {
  Mapping(data, "a spec");
  const Value* kind_value = Member(data, "kind");
  static const std::set<std::string> kinds = {"full", "mla", "sliding_window", "chunked_local", "mamba"};
  if (kind_value == nullptr || !kind_value->is_string() || !kinds.count(kind_value->get<std::string>())) {
    Refuse("unknown spec kind " + (kind_value ? PyJsonRepr(*kind_value) : std::string("(none)")) + " (KeyError)");
  }
  const std::string kind = kind_value->get<std::string>();
  const std::string owner = ClassName(kind);
  const ClassFields& fields = FieldsOf(kind);
  // The builder's conversions (dtype names, KVQuantMode names) come first; then the dataclass's arguments.
  if (Member(data, "dtype")) DTypeOf(data["dtype"]);
  if (Member(data, "dtypes")) {
    if (!data["dtypes"].is_array()) Refuse(owner + ".dtypes must be a list of dtype names (TypeError)");
    for (const Value& name : data["dtypes"]) DTypeOf(name);
  }
  if (Member(data, "shapes") && (!data["shapes"].is_array() ||
                                 !std::all_of(data["shapes"].begin(), data["shapes"].end(),
                                              [](const Value& s) { return s.is_array(); }))) {
    Refuse(owner + ".shapes must be a list of shapes (TypeError)");
  }
  if (Member(data, "kv_quant_mode")) QuantModeOf(data["kv_quant_mode"]);
  for (auto it = data.begin(); it != data.end(); ++it) {
    const std::string& key = it.key();
    if (key == "kind") continue;
    auto in = [&](const std::vector<std::string>& names) {
      return std::find(names.begin(), names.end(), key) != names.end();
    };
    if (!in(fields.required_positional) && !in(fields.required_keyword) && !in(fields.optional)) {
      Refuse(owner + ".__init__() got an unexpected keyword argument '" + key + "'");
    }
  }
  for (const auto* group : {&fields.required_positional, &fields.required_keyword}) {
    std::vector<std::string> missing;
    for (const std::string& name : *group) {
      if (!Member(data, name)) missing.push_back(name);
    }
    if (!missing.empty()) {
      const bool positional = group == &fields.required_positional;
      Refuse(owner + ".__init__() missing " + std::to_string(missing.size()) + " required " +
             (positional ? "positional" : "keyword-only") + " argument" + (missing.size() > 1 ? "s" : "") + ": " +
             NameList(missing));
    }
  }

  const int64_t block_size = ReadInt(owner, "block_size", data["block_size"], 1);
  if (kind == "mamba") {
    const Value& shapes_value = data["shapes"];
    if (shapes_value.empty()) Refuse(owner + ".shapes must be a non-empty tuple of shapes, got ()");
    std::vector<std::vector<int64_t>> shapes;
    for (size_t i = 0; i < shapes_value.size(); ++i) {
      if (shapes_value[i].empty()) {
        Refuse(owner + ".shapes[" + std::to_string(i) + "] must be a non-empty tuple of ints, got ()");
      }
      shapes.emplace_back();
      for (size_t j = 0; j < shapes_value[i].size(); ++j) {
        shapes.back().push_back(
            ReadInt(owner, "shapes[" + std::to_string(i) + "][" + std::to_string(j) + "]", shapes_value[i][j], 1));
      }
    }
    std::vector<DType> dtypes;
    for (const Value& name : data["dtypes"]) dtypes.push_back(DTypeOf(name));
    const std::optional<int64_t> padded = ReadOptionalInt(owner, "page_size_padded", Get(data, "page_size_padded"), 1);
    std::string mamba_type = "mamba2";
    if (const Value* t = Member(data, "mamba_type")) {
      if (!t->is_string()) Refuse(owner + ".mamba_type must be a str, got " + PyJsonRepr(*t));
      mamba_type = t->get<std::string>();
    }
    std::string cache_mode = "none";
    if (const Value* m = Member(data, "mamba_cache_mode")) {
      if (!m->is_string()) {
        Refuse(owner + ".mamba_cache_mode must be one of ['none', 'align'], got " + PyJsonRepr(*m));
      }
      cache_mode = m->get<std::string>();
    }
    int64_t speculative = 0;
    if (const Value* s = Member(data, "num_speculative_blocks")) {
      speculative = ReadInt(owner, "num_speculative_blocks", *s, 0);
    }
    int64_t checkpoints = 0;
    if (const Value* c = Member(data, "num_prefill_checkpoint_blocks")) {
      checkpoints = ReadInt(owner, "num_prefill_checkpoint_blocks", *c, 0);
    }
    return MakeSpec<MambaSpec>(block_size, shapes, dtypes, padded, cache_mode, speculative, mamba_type, checkpoints);
  }

  const int64_t num_kv_heads = ReadInt(owner, "num_kv_heads", data["num_kv_heads"], 1);
  const int64_t head_size = ReadInt(owner, "head_size", data["head_size"], 1);
  const DType dtype = DTypeOf(data["dtype"]);
  const KVQuantMode mode = Member(data, "kv_quant_mode") ? QuantModeOf(data["kv_quant_mode"]) : KVQuantMode::kNone;
  const std::optional<int64_t> padded = ReadOptionalInt(owner, "page_size_padded", Get(data, "page_size_padded"), 1);
  if (kind == "sliding_window") {
    const int64_t window = ReadInt(owner, "sliding_window", data["sliding_window"], 1);
    return MakeSpec<SlidingWindowSpec>(block_size, num_kv_heads, head_size, dtype, window, mode, padded);
  }
  if (kind == "chunked_local") {
    const int64_t chunk = ReadInt(owner, "attention_chunk_size", data["attention_chunk_size"], 1);
    return MakeSpec<ChunkedLocalAttentionSpec>(block_size, num_kv_heads, head_size, dtype, chunk, mode, padded);
  }
  // MLA's head_size_v defaults to 0 and is checked by the spec (only 0 is accepted); full attention's is >= 1.
  const std::optional<int64_t> head_size_v =
      ReadOptionalInt(owner, "head_size_v", Get(data, "head_size_v"), kind == "mla" ? 0 : 1);
  const std::optional<int64_t> window = ReadOptionalInt(owner, "sliding_window", Get(data, "sliding_window"), 1);
  const std::optional<int64_t> chunk =
      ReadOptionalInt(owner, "attention_chunk_size", Get(data, "attention_chunk_size"), 1);
  if (kind == "mla") {
    const std::optional<std::string> cache_str =
        ReadOptionalStr(owner, "cache_dtype_str", Get(data, "cache_dtype_str"));
    auto spec = std::make_shared<MLAAttentionSpec>(block_size, head_size, dtype, num_kv_heads, mode, padded, cache_str);
    if (head_size_v) spec->head_size_v = *head_size_v;
    spec->sliding_window = window;
    spec->attention_chunk_size = chunk;
    spec->Validate();
    return spec;
  }
  return MakeSpec<FullAttentionSpec>(block_size, num_kv_heads, head_size, dtype, head_size_v, mode, padded, window,
                                     chunk);
}

KVCacheConfig ImplKVConfig(const Value& layout) {
  Mapping(layout, "a KV layout");
  KVCacheConfig config;
  const Value& groups = Required(layout, "groups");
  if (!groups.is_array()) Refuse("a KV layout's groups must be a list");
  for (const Value& group : groups) {
    const Value& layers = Required(group, "layers");
    std::vector<std::string> names;
    bool valid = layers.is_array() && !layers.empty();
    std::string shown = "(";
    if (layers.is_array()) {
      for (size_t i = 0; i < layers.size(); ++i) {
        shown += (i ? ", " : "") + PyJsonRepr(layers[i]);
        valid = valid && layers[i].is_string() && !layers[i].get<std::string>().empty();
        if (layers[i].is_string()) names.push_back(layers[i].get<std::string>());
      }
    }
    shown += layers.is_array() && layers.size() == 1 ? ",)" : ")";
    auto spec = ImplSpec(Required(group, "spec"));
    if (!valid) Refuse("KVCacheGroupSpec.layer_names must be a non-empty tuple of names, got " + shown);
    config.kv_cache_groups.emplace_back(names, spec);
    config.kv_cache_groups.back().Validate();
  }
  if (const Value* per_layer = Member(layout, "per_layer")) {
    if (!per_layer->is_array()) Refuse("a KV layout's per_layer must be a list");
    std::vector<std::shared_ptr<KVCacheSpec>> specs;
    for (const Value& entry : *per_layer) specs.push_back(entry.is_null() ? nullptr : ImplSpec(entry));
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i] == nullptr) {
        config.per_layer_attn_specs.push_back(nullptr);
        continue;
      }
      auto attention = std::dynamic_pointer_cast<AttentionSpec>(specs[i]);
      if (attention == nullptr) {
        const auto* mamba = dynamic_cast<const MambaSpec*>(specs[i].get());
        Refuse("KVCacheConfig.per_layer_attn_specs[" + std::to_string(i) + "] must be an AttentionSpec or None, got " +
               (mamba ? MambaRepr(*mamba) : std::string(specs[i]->type_name())));
      }
      config.per_layer_attn_specs.push_back(attention);
    }
  }
  return config;
}

const Value& DefaultProbe() {
  static const Value probe = Value::parse(R"({"groups": [{"layers": ["layer1"], "spec": {
      "kind": "full", "block_size": 16, "num_kv_heads": 2, "head_size": 64, "dtype": "float32"}}]})");
  return probe;
}

}  // namespace gates::mem
