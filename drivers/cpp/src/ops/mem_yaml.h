// Just enough YAML to read the recorded snapshot fixtures (gates/rows/road_v1_mem/fixtures/snapshots/*.yaml) as
// PyYAML's safe_load reads them: block mappings nested by indentation, '#' comments, and plain or quoted scalars
// resolved as YAML 1.1 does (ints, floats with a '.', true/false, null, strings). Anything else (sequences, flow
// collections, anchors, multi-line scalars) is refused, naming the line.
#pragma once

#include <string>

#include "mem_common.h"

namespace gates::mem {

Value ParseYamlMapping(const std::string& text, const std::string& source);

}  // namespace gates::mem
