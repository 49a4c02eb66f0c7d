// The append-only history rule (include/vllm/capi/history.h).
#include "vllm/capi/history.h"

#include <algorithm>
#include <set>

#include "vllm/v1/str_repr.h"

namespace vllm::capi {
namespace {

using vllm::v1::PyStrRepr;

// (size, alignment) of the C types a header's members use, on LP64.
std::optional<std::pair<long long, long long>> SizeAlign(const std::string& ctype) {
  static const std::map<std::string, std::pair<long long, long long>> table = {
      {"const char *", {8, 8}}, {"char *", {8, 8}},  {"void *", {8, 8}},   {"const void *", {8, 8}},
      {"int8_t", {1, 1}},       {"uint8_t", {1, 1}}, {"int16_t", {2, 2}},  {"uint16_t", {2, 2}},
      {"int32_t", {4, 4}},      {"uint32_t", {4, 4}}, {"int64_t", {8, 8}}, {"uint64_t", {8, 8}},
      {"float", {4, 4}},        {"double", {8, 8}},
  };
  auto it = table.find(ctype);
  if (it == table.end()) return std::nullopt;
  return it->second;
}

std::string PyNameList(std::vector<std::string> names, bool sorted) {
  if (sorted) std::sort(names.begin(), names.end());
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + PyStrRepr(names[i]);
  return out + "]";
}

std::string PyIntList(const std::vector<int>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

std::string MovedOffsets(const std::vector<DeclaredMember>& members, int released) {
  std::vector<DeclaredMember> before_members;
  for (const auto& m : members)
    if (m.since <= released) before_members.push_back(m);
  std::string why_before, why_now;
  const auto before = OffsetsOf(before_members, &why_before);
  const auto now = OffsetsOf(members, &why_now);
  if (!before || !now) return "offsets not computed: " + (!before ? why_before : why_now);
  std::vector<std::string> moved;
  for (const auto& m : before_members) {
    const long long was = before->at(m.name), is = now->at(m.name);
    if (was != is) moved.push_back(m.name + " " + std::to_string(was) + " -> " + std::to_string(is));
  }
  const std::string v = "v" + std::to_string(released);
  if (moved.empty())
    return "no " + v + " offset moved (the member fills padding), but later versions would read it as theirs";
  std::string listed;
  for (size_t i = 0; i < moved.size(); ++i) listed += (i ? ", " : "") + moved[i];
  return "offsets that moved from the " + v + " layout: " + listed;
}

void CheckNames(const std::vector<DeclaredMember>& members) {
  std::set<std::string> seen;
  bool repeated = false;
  for (const auto& m : members) repeated = !seen.insert(m.name).second || repeated;
  std::vector<std::string> names;
  for (const auto& m : members) names.push_back(m.name);
  if (repeated) throw AbiHistoryError("a member is declared twice: " + PyNameList(names, false));
  int lowest = members.front().since;
  for (const auto& m : members) lowest = std::min(lowest, m.since);
  if (lowest < 1) {
    std::string listed = "[";
    for (size_t i = 0; i < members.size(); ++i)
      listed += (i ? ", (" : "(") + PyStrRepr(members[i].name) + ", " + std::to_string(members[i].since) + ")";
    throw AbiHistoryError("versions start at v1; got members " + listed + "]");
  }
}

}  // namespace

std::optional<std::map<std::string, long long>> OffsetsOf(const std::vector<DeclaredMember>& members,
                                                          std::string* why) {
  std::map<std::string, long long> offsets;
  long long end = 0;
  for (const auto& m : members) {
    const auto layout = SizeAlign(m.ctype);
    if (!layout) {
      if (why)
        *why = "member " + PyStrRepr(m.name) + " has the C type " + PyStrRepr(m.ctype) +
               ", which this reader does not lay out";
      return std::nullopt;
    }
    const auto [size, align] = *layout;
    end = (end + align - 1) / align * align;
    offsets[m.name] = end;
    end += size;
  }
  return offsets;
}

void CheckOrder(const std::vector<DeclaredMember>& members) {
  for (size_t i = 0; i + 1 < members.size(); ++i) {
    const DeclaredMember& before = members[i];
    const DeclaredMember& after = members[i + 1];
    if (after.since < before.since) {
      const std::string vb = "v" + std::to_string(before.since), va = "v" + std::to_string(after.since);
      throw AbiHistoryError("member " + PyStrRepr(before.name) + " [" + vb + "] stands before " +
                            PyStrRepr(after.name) + " [" + va + "]: a " + vb +
                            " member was inserted mid-struct, moving " + PyStrRepr(after.name) + " for " + va +
                            " callers; " + MovedOffsets(members, before.since - 1));
    }
  }
}

void CheckBumps(const std::vector<DeclaredMember>& members, int abi_version,
                const std::map<int, std::vector<std::string>>& log) {
  int newest = members.front().since;
  std::set<int> with_members;
  for (const auto& m : members) {
    newest = std::max(newest, m.since);
    with_members.insert(m.since);
  }
  const std::string macro = std::to_string(abi_version);
  if (newest > abi_version)
    throw AbiHistoryError("VLLM_ABI_VERSION is " + macro + " but the newest member is from v" +
                          std::to_string(newest) + ": a new member needs a version bump");
  for (int version = 1; version <= abi_version; ++version) {
    if (!with_members.count(version) && !log.count(version))
      throw AbiHistoryError("v" + std::to_string(version) +
                            " has no member and no entry in the version history: VLLM_ABI_VERSION " + macro +
                            " counts a version bump the history does not explain");
  }
  std::vector<std::string> beyond;
  for (const auto& [version, names] : log)
    if (version < 1 || version > abi_version) beyond.push_back("v" + std::to_string(version));
  if (!beyond.empty())
    throw AbiHistoryError("the version history has entries for " + PyNameList(beyond, false) + " outside v1..v" +
                          macro + ": a bump the VLLM_ABI_VERSION macro does not have");
}

void CheckLog(const HeaderFacts& facts) {
  std::map<std::string, int> since;
  for (const auto& m : facts.members) since[m.name] = m.since;
  if (facts.convention == Convention::kAnnotations) {
    std::vector<int> versions;
    for (const auto& [version, names] : facts.log) versions.push_back(version);
    bool exact = static_cast<int>(versions.size()) == facts.abi_version;
    for (size_t i = 0; exact && i < versions.size(); ++i) exact = versions[i] == static_cast<int>(i) + 1;
    if (!exact)
      throw AbiHistoryError("the history needs exactly one entry for each of v1..v" +
                            std::to_string(facts.abi_version) + ", it has " + PyIntList(versions));
    for (const auto& [version, listed] : facts.log) {
      std::vector<std::string> annotated;
      for (const auto& m : facts.members)
        if (m.since == version) annotated.push_back(m.name);
      std::vector<std::string> a = annotated, l = listed;
      std::sort(a.begin(), a.end());
      std::sort(l.begin(), l.end());
      if (a != l) {
        const std::string v = "v" + std::to_string(version);
        throw AbiHistoryError("the " + v + " history entry appends " + PyNameList(listed, true) +
                              " but the members annotated [" + v + "] are " + PyNameList(annotated, true));
      }
    }
    return;
  }
  for (const auto& [version, named] : facts.log) {
    const std::string v = "v" + std::to_string(version);
    for (const auto& name : named) {
      auto it = since.find(name);
      if (it == since.end())
        throw AbiHistoryError("the " + v + " version-log entry names vllm_model_params." + name +
                              ", but the struct declares no member " + PyStrRepr(name) +
                              ": a bump the struct does not show");
      if (it->second != version)
        throw AbiHistoryError("the " + v + " version-log entry names vllm_model_params." + name +
                              ", but the struct has " + PyStrRepr(name) + " in its (ABI v" +
                              std::to_string(it->second) +
                              ") run: a member needs its own heading, or it joins the run before it");
    }
  }
}

VersionHistory Versions(const std::vector<DeclaredMember>& members, int abi_version) {
  VersionHistory history;
  history.abi_version = abi_version;
  for (int v = 1; v <= abi_version; ++v) {
    std::vector<std::string> names;
    for (const auto& m : members)
      if (m.since <= v) names.push_back(m.name);
    history.versions.emplace_back("v" + std::to_string(v), names);
  }
  return history;
}

VersionHistory CheckHistory(const HeaderFacts& facts) {
  CheckNames(facts.members);
  CheckOrder(facts.members);
  CheckBumps(facts.members, facts.abi_version, facts.log);
  CheckLog(facts);
  return Versions(facts.members, facts.abi_version);
}

VersionHistory HeaderHistory(const std::string& header_text) { return CheckHistory(ReadHeader(header_text)); }

}  // namespace vllm::capi
