// Python's view of JSON-shaped values, for messages that quote a config field or a case input: repr() of the
// value ({'a': 1}, [1, 2], 'text', True, None, 1.0) and the name of its Python type (int, float, str, bool,
// list, dict, NoneType). An object {"$int": "<digits>"} is an integer too large for 64 bits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace vllm::entrypoints {

using Json = nlohmann::ordered_json;

std::string PyJsonRepr(const Json& value);
std::string PyJsonTypeName(const Json& value);

// An integer as Python sees one (not a bool): kFits with the value, kBig (beyond int64_t, `digits` set) or kNot.
enum class JsonIntKind { kFits, kBig, kNot };
JsonIntKind JsonInt(const Json& value, int64_t* out, std::string* digits = nullptr);

// cfg.get(name) is not None: the member when present and not null, else nullptr.
const Json* JsonGet(const Json& object, const std::string& name);

}  // namespace vllm::entrypoints
