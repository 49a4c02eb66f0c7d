// Driver-side extras of the registry and the settings (not for operations).
#pragma once

#include <string>
#include <vector>

#include "driver/operation.h"

namespace gates {

// Names registered more than once (the driver refuses to start with any).
const std::vector<std::string>& duplicate_operation_names();

// Replaces the settings `setting()` reads: hello's "settings" object (or --setting NAME=VALUE in --lines mode).
void set_settings(const Value& settings);
void set_setting(const std::string& name, const std::string& value);

}  // namespace gates
