// The contract between the driver's protocol core and the operations it serves (docs/worker-protocol.md, §12).
//
// An operation takes the case input as plain data (the shape the row's gate cases use) and returns plain data,
// or throws gates::Raised with an error kind. Operations register themselves by name at static-init time.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace gates {

// Decoded plain data. A `$map` whose keys are all strings is a JSON object; any other `$map` stays tagged,
// {"$map": [[key, value], ...]} with decoded items. `$tuple` is an array. `$float` is a double (NaN, ±inf).
// An integer outside int64/uint64 is {"$int": "<decimal text>"}. Encoding reverses this: objects become `$map`,
// a one-member object whose name starts with '$' is sent as written, non-finite doubles become `$float`.
using Value = nlohmann::ordered_json;

// What the code under gate raised. kind: "invalid-argument", "runtime-error", "usage" (also invalid-argument),
// "abi-history" (also invalid-argument), "abi-version" (also runtime-error), "model-load" (also runtime-error).
// The judge checks the kind and that the message carries the case's facts (numbers, flag and field names).
struct Raised : std::runtime_error {
  Raised(std::string kind_, const std::string& message) : std::runtime_error(message), kind(std::move(kind_)) {}
  std::string kind;
};

// The kinds a kind also counts as, most derived first, as the reply's "mro".
std::vector<std::string> kind_lineage(const std::string& kind);

// Settings of the implementation under gate, from the judge's hello ("settings"), e.g. "header", "library";
// paths there are relative to the project root, which is the worker's working directory.
std::string setting(const std::string& name, const std::string& fallback);

using Operation = std::function<Value(const Value& input)>;

void register_operation(const std::string& name, Operation operation);
const Operation* find_operation(const std::string& name);
std::vector<std::string> operation_names();

struct Registrar {
  Registrar(const char* name, Operation operation) { register_operation(name, std::move(operation)); }
};

}  // namespace gates

#define GATES_CONCAT_(a, b) a##b
#define GATES_CONCAT(a, b) GATES_CONCAT_(a, b)
// GATES_OPERATION("resolve-num-blocks", [](const gates::Value& input) -> gates::Value { ... });
#define GATES_OPERATION(name, ...) static ::gates::Registrar GATES_CONCAT(gates_registrar_, __COUNTER__)(name, __VA_ARGS__)
