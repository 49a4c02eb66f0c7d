// dlopen and the version handshake (include/vllm/capi/library.h).
#include "vllm/capi/library.h"

#include <dlfcn.h>

#include <utility>
#include <vector>

#include "vllm/capi/history.h"

namespace vllm::capi {
namespace {

#ifdef GATES_VLLM_H
const char kBindingHeader[] = GATES_VLLM_H;
#else
const char kBindingHeader[] = "spec/include/vllm.h";
#endif

using Typed = std::pair<std::string, std::string>;  // (name, C type)

std::vector<Typed> BindingMembers() {
  std::vector<Typed> members;
  for (const MemberInfo& m : Members()) members.emplace_back(m.name, m.ctype);
  return members;
}

std::string FirstDifference(const std::vector<Typed>& theirs, int reported, int expected) {
  const std::vector<Typed> mine = BindingMembers();
  const size_t common = std::min(theirs.size(), mine.size());
  for (size_t i = 0; i < common; ++i) {
    if (mine[i] != theirs[i]) {
      return "member " + std::to_string(i + 1) + " is " + theirs[i].second + " " + theirs[i].first + " in v" +
             std::to_string(reported) + " but " + mine[i].second + " " + mine[i].first + " in v" +
             std::to_string(expected);
    }
  }
  const bool theirs_longer = theirs.size() > mine.size();
  const std::vector<Typed>& longer = theirs_longer ? theirs : mine;
  const int longer_version = theirs_longer ? reported : expected, shorter_version = theirs_longer ? expected : reported;
  return "v" + std::to_string(shorter_version) + " ends before " + longer[common].first + ", member " +
         std::to_string(common + 1) + " of v" + std::to_string(longer_version);
}

}  // namespace

std::string LayoutVerdict(const std::optional<std::string>& header_text, int reported, int expected) {
  if (!header_text) return "whether vllm_model_params differs is not known without the library's header";
  HeaderFacts facts;
  try {
    facts = ReadHeader(*header_text);
    CheckHistory(facts);
  } catch (const AbiHistoryError& err) {
    return std::string("whether vllm_model_params differs is not known: the library's header is refused (") +
           err.what() + ")";
  }
  if (facts.abi_version != reported) {
    return "whether vllm_model_params differs is not known: the header given for the library is v" +
           std::to_string(facts.abi_version) + ", not v" + std::to_string(reported);
  }
  std::vector<Typed> theirs;
  for (const auto& m : facts.members) theirs.emplace_back(m.name, m.ctype);
  if (theirs == BindingMembers()) {
    return "vllm_model_params is the same in v" + std::to_string(reported) + " and v" + std::to_string(expected) +
           " (the versions between them changed entry points only)";
  }
  return "the vllm_model_params layouts differ: " + FirstDifference(theirs, reported, expected);
}

CapiLibrary::CapiLibrary(CapiLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), abi_version_(other.abi_version_) {}

CapiLibrary::~CapiLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

CapiLibrary CapiLibrary::Open(const std::string& path, int expected, const std::optional<std::string>& header_text) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw LibraryLoadError(path + " cannot be loaded: " + (why ? why : "dlopen failed"));
  }
  CapiLibrary library(handle, 0);
  using Version = int32_t (*)(void);
  auto version = reinterpret_cast<Version>(dlsym(handle, "vllm_abi_version"));
  if (version == nullptr)
    throw AbiVersionMismatch(path + " exports no vllm_abi_version(); it is not a vllm C ABI library");
  const int reported = version();
  if (reported != expected) {
    throw AbiVersionMismatch(path + " was built for vllm C ABI v" + std::to_string(reported) +
                             " but this binding mirrors v" + std::to_string(expected) + " (" + kBindingHeader +
                             "), so it is refused: the entry points of two ABI versions differ, and " +
                             LayoutVerdict(header_text, reported, expected) +
                             ". Rebuild the library against the v" + std::to_string(expected) +
                             " header, or use a binding for v" + std::to_string(reported) + ".");
  }
  library.abi_version_ = reported;
  return library;
}

vllm_model_params CapiLibrary::ModelParamsDefault() const {
  using Default = vllm_model_params (*)(void);
  auto make = reinterpret_cast<Default>(dlsym(handle_, "vllm_model_params_default"));
  if (make == nullptr) throw AbiVersionMismatch("the library exports no vllm_model_params_default()");
  return make();
}

int CheckedAbiVersion(const std::string& path, const std::optional<std::string>& header_text) {
  return CapiLibrary::Open(path, kAbiVersion, header_text).abi_version();
}

}  // namespace vllm::capi
