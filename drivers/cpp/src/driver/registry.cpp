// The operation registry (operation.h): filled at static-init time by GATES_OPERATION.
#include <map>
#include <string>
#include <vector>

#include "driver/operation.h"
#include "driver/registry_internal.h"

namespace gates {
namespace {

std::map<std::string, Operation>& registry() {
  static std::map<std::string, Operation> operations;  // constructed on first use: safe across translation units
  return operations;
}

std::vector<std::string>& duplicates() {
  static std::vector<std::string> names;
  return names;
}

}  // namespace

void register_operation(const std::string& name, Operation operation) {
  if (!registry().emplace(name, std::move(operation)).second) duplicates().push_back(name);
}

const Operation* find_operation(const std::string& name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : &it->second;
}

std::vector<std::string> operation_names() {
  std::vector<std::string> names;
  for (const auto& entry : registry()) names.push_back(entry.first);
  return names;
}

const std::vector<std::string>& duplicate_operation_names() { return duplicates(); }

std::vector<std::string> kind_lineage(const std::string& kind) {
  if (kind == "usage" || kind == "abi-history") return {kind, "invalid-argument"};
  if (kind == "abi-version" || kind == "model-load") return {kind, "runtime-error"};
  return {kind};
}

}  // namespace gates
