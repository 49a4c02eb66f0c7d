// CAPI-ABI header-history (gate history) and checked-abi-version (gate version): the header input rendered as the
// Python builder renders it, then read by the port's reader (include/vllm/capi/history.h); the library input built
// or taken from the settings, then opened with dlopen (include/vllm/capi/library.h).
#include "capi_common.h"
#include "vllm/capi/history.h"
#include "vllm/capi/library.h"

namespace gates::capi {
namespace {

GATES_CAPI_OPERATION("header-history", [](const Value& input) -> Value {
  const vllm::capi::VersionHistory history = vllm::capi::HeaderHistory(HeaderOf(input));
  Value versions = Value::object();
  for (const auto& [name, members] : history.versions) versions[name] = members;
  Value out = Value::object();
  out["abi_version"] = history.abi_version;
  out["versions"] = versions;
  return out;
});

GATES_CAPI_OPERATION("checked-abi-version", [](const Value& input) -> Value {
  const Value* which = Find(input, "library");
  if (which == nullptr) throw std::invalid_argument("a library input needs 'library'");
  const std::optional<std::string> header = LibraryHeaderOf(*which);
  return vllm::capi::CheckedAbiVersion(LibraryPathOf(*which), header);
});

}  // namespace
}  // namespace gates::capi
