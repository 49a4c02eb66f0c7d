// Shared pieces of the ROAD-V1-MEM operation adapters: reading case inputs with the Python port's type checks
// (a bool or a float where an int belongs is a TypeError there), and turning the port code's exceptions into the
// error kinds of the worker protocol.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../driver/operation.h"
#include "vllm/entrypoints/json_repr.h"

namespace gates::mem {

using vllm::entrypoints::PyJsonRepr;
using vllm::entrypoints::PyJsonTypeName;

// Runs an operation body; std::invalid_argument, std::out_of_range, std::overflow_error (ValueError, TypeError,
// OverflowError in the Python port) become invalid-argument, any other std::runtime_error runtime-error.
Value Guarded(const Operation& body, const Value& input);

[[noreturn]] void Refuse(const std::string& message);  // invalid-argument

// `value` as an int (not a bool) >= minimum: "owner.name must be an int >= minimum, got <repr> (<type>)" when it is
// not an int, the port's range refusal when it is below. An int beyond int64_t is refused as an overflow.
int64_t ReadInt(const std::string& owner, const std::string& name, const Value& value, int64_t minimum);
// As ReadInt; null is std::nullopt.
std::optional<int64_t> ReadOptionalInt(const std::string& owner, const std::string& name, const Value& value,
                                       int64_t minimum);
// A finite number (not a bool) in (0, 1], refused as check_fraction words it, with the value as given.
double ReadFraction(const std::string& owner, const std::string& name, const Value& value);
// A str or null: "owner.name must be a str or None, got <repr> (<type>)".
std::optional<std::string> ReadOptionalStr(const std::string& owner, const std::string& name, const Value& value);

// The member `name` of a mapping, or nullptr.
const Value* Member(const Value& object, const std::string& name);
// The member, refused as Python's KeyError would be when absent.
const Value& Required(const Value& object, const std::string& name);
// A mapping, refused naming `what` otherwise.
const Value& Mapping(const Value& value, const std::string& what);

// An unsigned decimal number as plain data: an int when it fits, else {"$int": "<digits>"}.
Value DecimalValue(const std::string& digits);

// Sorted Python list of str repr: ['a', 'b'].
std::string PySortedNames(std::vector<std::string> names);

}  // namespace gates::mem

// GATES_MEM_OPERATION("name", [](const gates::Value& input) -> gates::Value { ... });
#define GATES_MEM_OPERATION(name, ...)                                                          \
  GATES_OPERATION(name, [](const ::gates::Value& input) -> ::gates::Value {                     \
    return ::gates::mem::Guarded(::gates::Operation(__VA_ARGS__), input);                       \
  })
