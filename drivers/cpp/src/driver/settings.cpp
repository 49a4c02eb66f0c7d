// Settings of the implementation under gate (operation.h `setting`), from the judge's hello.
#include <map>
#include <string>

#include "driver/operation.h"
#include "driver/registry_internal.h"

namespace gates {
namespace {

std::map<std::string, std::string>& settings() {
  static std::map<std::string, std::string> values;
  return values;
}

}  // namespace

void set_settings(const Value& values) {
  settings().clear();
  if (!values.is_object()) return;
  for (auto it = values.begin(); it != values.end(); ++it)
    settings()[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
}

void set_setting(const std::string& name, const std::string& value) { settings()[name] = value; }

std::string setting(const std::string& name, const std::string& fallback) {
  auto it = settings().find(name);
  return it == settings().end() ? fallback : it->second;
}

}  // namespace gates
