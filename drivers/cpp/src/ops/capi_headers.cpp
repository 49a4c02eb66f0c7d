// Header inputs as text, rendered as gates/rows/capi_abi/build.py renders them (render_header,
// render_port_header, _variant), so that the port's reader reads the same text the Python port's reader reads.
#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "capi_common.h"
#include "vllm/entrypoints/json_repr.h"

namespace gates::capi {
namespace {

using Member = std::tuple<std::string, std::string, int>;  // (name, C type, since)
using History = std::map<int, std::vector<std::string>>;

const char kTemplateHead[] =
    "/* vllm.h rendered by gates/inputs/capi.py for a CAPI-ABI gate case.\n"
    " *\n"
    " * Version history:\n";
const char kTemplateMiddle[] =
    " */\n"
    "#ifndef VLLM_H_\n"
    "#define VLLM_H_\n"
    "\n"
    "#include <stdint.h>\n"
    "\n"
    "#define VLLM_ABI_VERSION ";
const char kTemplateEnums[] =
    "\n"
    "\n"
    "typedef enum vllm_status {\n"
    "  VLLM_OK = 0,\n"
    "  VLLM_ERR_INVALID_ARGUMENT = 1,\n"
    "  VLLM_ERR_MODEL_LOAD = 2,\n"
    "  VLLM_ERR_RUNTIME = 3,\n"
    "  VLLM_ERR_UNKNOWN = 4\n"
    "} vllm_status;\n"
    "\n"
    "typedef struct vllm_model_params {\n";
const char kTemplateTail[] =
    "} vllm_model_params;\n"
    "\n"
    "vllm_model_params vllm_model_params_default(void);\n"
    "int32_t vllm_abi_version(void);\n"
    "\n"
    "#endif\n";

std::string Fill(const std::string& history, int version, const std::string& members) {
  return kTemplateHead + history + kTemplateMiddle + std::to_string(version) + kTemplateEnums + members +
         kTemplateTail;
}

std::string Declaration(const Member& m) {
  const std::string& ctype = std::get<1>(m);
  return "  " + ctype + (!ctype.empty() && ctype.back() == '*' ? "" : " ") + std::get<0>(m) + ";\n";
}

std::string RenderAnnotations(const std::vector<Member>& members, int version, const History& history) {
  std::string lines;
  for (const auto& [v, names] : history) {
    std::string added;
    for (size_t i = 0; i < names.size(); ++i) added += (i ? " +" : "+") + names[i];
    lines += " *   v" + std::to_string(v) + "  " + (added.empty() ? "entry points outside vllm_model_params" : added) +
             "\n";
  }
  std::string body;
  for (const auto& m : members)
    body += "  /* [v" + std::to_string(std::get<2>(m)) + "] member " + std::get<0>(m) + ". */\n" + Declaration(m);
  return Fill(lines, version, body);
}

std::string RenderHeadings(const std::vector<Member>& members, int version, const History& history) {
  std::string lines;
  for (const auto& [v, names] : history) {
    std::string named;
    for (size_t i = 0; i < names.size(); ++i) named += (i ? " / " : "") + std::string("vllm_model_params.") + names[i];
    lines += " * v" + std::to_string(v) + ": " +
             (named.empty() ? std::string("entry points only; no struct changed") : named + " appended") + ".\n";
  }
  std::string body;
  std::optional<int> previous;
  for (size_t i = 0; i < members.size(); ++i) {
    const auto& [name, ctype, since] = members[i];
    const std::string v = std::to_string(since);
    if ((!previous || since != *previous) && !(i == 0 && since == 1)) {
      body += "  /* \xE2\x94\x80\xE2\x94\x80 Run of v" + v + " members (ABI v" + v + ") \xE2\x94\x80\xE2\x94\x80\n   * member " +
              name + ". */\n";
    } else {
      body += "  /* member " + name + ". */\n";
    }
    body += Declaration(members[i]);
    previous = since;
  }
  return Fill(lines, version, body);
}

const std::vector<Member>& V16Members() {
  static const std::vector<Member> members = {
      {"model_path", "const char *", 1},        {"tokenizer_config_path", "const char *", 1},
      {"block_size", "int32_t", 1},             {"num_blocks", "int32_t", 1},
      {"max_model_len", "int32_t", 1},          {"max_num_seqs", "int32_t", 1},
      {"tool_parser", "const char *", 4},       {"reasoning_parser", "const char *", 5},
      {"speculative_config", "const char *", 6}, {"enable_prefix_caching", "int32_t", 7},
      {"max_num_batched_tokens", "int32_t", 9}, {"scheduling_policy", "const char *", 9},
      {"kv_transfer_config", "const char *", 9}, {"enable_jump_forward", "int32_t", 10},
      {"device", "int32_t", 14},                {"gpu_memory_utilization", "double", 16},
      {"kv_cache_memory_bytes", "int64_t", 16},
  };
  return members;
}

History V16History() {
  History history;
  for (int v = 1; v <= 16; ++v) {
    history[v] = {};
    for (const auto& m : V16Members())
      if (std::get<2>(m) == v) history[v].push_back(std::get<0>(m));
  }
  return history;
}

std::vector<Member> With(std::vector<Member> members, const std::string& before, const Member& added) {
  auto at = std::find_if(members.begin(), members.end(), [&](const Member& m) { return std::get<0>(m) == before; });
  members.insert(at, added);
  return members;
}

}  // namespace

std::string VariantHeader(const std::string& name) {
  std::vector<Member> members = V16Members();
  History history = V16History();
  const Member tp{"tensor_parallel_size", "int32_t", 17};
  if (name == "v16") return RenderAnnotations(members, 16, history);
  if (name == "v15") {
    std::vector<Member> old;
    for (const auto& m : members)
      if (std::get<2>(m) <= 15) old.push_back(m);
    history.erase(16);
    return RenderAnnotations(old, 15, history);
  }
  if (name == "v17-appended") {
    members.push_back(tp);
    history[17] = {"tensor_parallel_size"};
    return RenderAnnotations(members, 17, history);
  }
  if (name == "inserted-mid-struct") {
    history[17] = {"offload_config"};
    return RenderAnnotations(With(members, "enable_jump_forward", {"offload_config", "const char *", 17}), 17, history);
  }
  if (name == "inserted-before-device") {
    history[17] = {"disable_sliding_window"};
    return RenderAnnotations(With(members, "device", {"disable_sliding_window", "int32_t", 17}), 17, history);
  }
  if (name == "entry-point-bump") {
    history[17] = {};
    return RenderAnnotations(members, 17, history);
  }
  if (name == "bump-without-history-entry") return RenderAnnotations(members, 17, history);
  if (name == "member-without-bump") {
    members.push_back(tp);
    history[17] = {"tensor_parallel_size"};
    return RenderAnnotations(members, 16, history);
  }
  if (name == "member-without-history-entry") {
    members.push_back({"tensor_parallel_size", "int32_t", 16});
    return RenderAnnotations(members, 16, history);
  }
  throw std::invalid_argument("unknown header variant '" + name + "'");
}

namespace {

int IntOf(const Value& v, const std::string& what) {
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_string()) {
    const std::string text = v.get<std::string>();
    if (!text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::stoi(text);
  }
  throw std::invalid_argument(what + " must be an int, got " + vllm::entrypoints::PyJsonRepr(v));
}

// The fixture text with each [old, new] of edits applied in order, each old text occurring exactly once
// (build.py edited).
std::string Edited(std::string text, const Value& edits, const Value& fixture) {
  const std::string where = " of fixture " + vllm::entrypoints::PyJsonRepr(fixture);
  if (!edits.is_array())
    throw std::invalid_argument("edits" + where + " are a list of [old text, new text], got " +
                                vllm::entrypoints::PyJsonRepr(edits));
  for (size_t index = 0; index < edits.size(); ++index) {
    const Value& edit = edits[index];
    const std::string which = "edits[" + std::to_string(index) + "]" + where;
    if (!edit.is_array() || edit.size() != 2 || !edit[0].is_string() || !edit[1].is_string())
      throw std::invalid_argument(which + " is [old text, new text], got " + vllm::entrypoints::PyJsonRepr(edit));
    const std::string old_text = edit[0].get<std::string>();
    size_t count = 0;
    for (size_t at = text.find(old_text); at != std::string::npos && !old_text.empty();
         at = text.find(old_text, at + old_text.size()))
      ++count;
    if (count != 1)
      throw std::invalid_argument(which + ": " + vllm::entrypoints::PyJsonRepr(edit[0]) + " occurs " +
                                  std::to_string(count) + " times, not once");
    text.replace(text.find(old_text), old_text.size(), edit[1].get<std::string>());
  }
  return text;
}

std::string RenderedFromMembers(const Value& input) {
  std::vector<Member> members;
  for (const Value& m : *Find(input, "members")) {
    if (!m.is_array() || m.size() != 3 || !m[0].is_string() || !m[1].is_string())
      throw std::invalid_argument("a member is [name, C type, since], got " + vllm::entrypoints::PyJsonRepr(m));
    members.emplace_back(m[0].get<std::string>(), m[1].get<std::string>(), IntOf(m[2], "a member's version"));
  }
  const Value* version = Find(input, "abi_version");
  const Value* history_value = Find(input, "history");
  if (version == nullptr || history_value == nullptr)
    throw std::invalid_argument("a members header needs abi_version and history");
  History history;
  auto add = [&](const Value& key, const Value& names) {
    std::vector<std::string> listed;
    for (const Value& n : names) listed.push_back(n.get<std::string>());
    history[IntOf(key, "a history version")] = listed;
  };
  if (history_value->is_object() && history_value->contains("$map")) {
    for (const Value& pair : (*history_value)["$map"]) add(pair[0], pair[1]);
  } else {
    for (auto it = history_value->begin(); it != history_value->end(); ++it) add(Value(it.key()), it.value());
  }
  const Value* style = Find(input, "style");
  const std::string chosen = style == nullptr ? "annotations" : style->get<std::string>();
  if (chosen == "annotations") return RenderAnnotations(members, IntOf(*version, "abi_version"), history);
  if (chosen == "headings") return RenderHeadings(members, IntOf(*version, "abi_version"), history);
  throw std::invalid_argument("a header's style is 'annotations' or 'headings', got '" + chosen + "'");
}

}  // namespace

std::string HeaderOf(const Value& input) {
  if (const Value* header = Find(input, "header")) {
    if (*header == "spec") return ReadText("spec/include/vllm.h");
    if (*header == "configured") return ReadText(ConfiguredHeaderPath());
  }
  if (const Value* fixture = Find(input, "fixture")) {
    const Value* edits = Find(input, "edits");
    return edits == nullptr ? FixtureText(*fixture) : Edited(FixtureText(*fixture), *edits, *fixture);
  }
  if (const Value* variant = Find(input, "variant")) {
    if (!variant->is_string()) throw std::invalid_argument("a variant is a name");
    return VariantHeader(variant->get<std::string>());
  }
  if (Find(input, "members") != nullptr) return RenderedFromMembers(input);
  throw std::invalid_argument("a header input needs 'header: spec|configured', 'fixture', 'variant' or 'members'");
}

}  // namespace gates::capi
