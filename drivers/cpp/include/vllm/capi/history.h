// The append-only history rule of vllm_model_params (spec/c-abi.md CAPI-3.1 to CAPI-3.5; ported from
// impl/capi/history.py): names once each, versions never decrease along the struct (a member inserted mid-struct
// is refused with the offsets it moved), no member past VLLM_ABI_VERSION, every version bump explained by a new
// member or a history entry (entry-point-only bumps, as the port's v17 and v18), and history entries that agree
// with the members' versions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vllm/capi/header_reader.h"

namespace vllm::capi {

// Each version's members: "v1".."vN" -> names in struct order.
struct VersionHistory {
  int abi_version = 0;
  std::vector<std::pair<std::string, std::vector<std::string>>> versions;
};

// LP64 offsets of members laid out in order, or the reason (a C type this reader does not lay out).
std::optional<std::map<std::string, long long>> OffsetsOf(const std::vector<DeclaredMember>& members,
                                                          std::string* why);

void CheckOrder(const std::vector<DeclaredMember>& members);
void CheckBumps(const std::vector<DeclaredMember>& members, int abi_version,
                const std::map<int, std::vector<std::string>>& log);
void CheckLog(const HeaderFacts& facts);
VersionHistory Versions(const std::vector<DeclaredMember>& members, int abi_version);

// All the checks, then Versions. Throws AbiHistoryError naming the member or version at fault.
VersionHistory CheckHistory(const HeaderFacts& facts);
VersionHistory HeaderHistory(const std::string& header_text);

}  // namespace vllm::capi
