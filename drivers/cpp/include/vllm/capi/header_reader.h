// Reading a C ABI header's vllm_model_params: its members with their versions, VLLM_ABI_VERSION and the version
// history, in either convention of spec/c-abi.md CAPI-1.6 (ported from impl/capi/header_reader.py):
//  - annotations (spec/include/vllm.h): "[vN]" opens each member's comment; history lines " *   vN  text" name
//    the members a version appended as "+member";
//  - headings (the C++ port's include/vllm.h): a comment whose first line carries "(ABI vN)" heads the run of
//    members after it (members before the first heading are v1); the version log is prose, entries "vN:" /
//    "vN —" naming appended members as "vllm_model_params.<member>".
// In both the history is the comments before "#define VLLM_ABI_VERSION" (CAPI-1.7): a "vN:" remark after it, on
// another struct's member or an entry point, is never a log entry.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace vllm::capi {

// A header whose history breaks a rule, or whose declarations cannot be read (the Python port's AbiHistoryError).
struct AbiHistoryError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

enum class Convention { kAnnotations, kHeadings };

struct DeclaredMember {
  std::string name;
  std::string ctype;  // spaces normalised: "const char *"
  int since = 0;
};

struct HeaderFacts {
  Convention convention = Convention::kAnnotations;
  int abi_version = 0;
  std::vector<DeclaredMember> members;
  // Each history entry's version -> the members it names as appended (in the order named, without repeats).
  std::map<int, std::vector<std::string>> log;
};

int ReadAbiVersion(const std::string& text);
HeaderFacts ReadHeader(const std::string& text);

}  // namespace vllm::capi
