// Range checks shared by the specs and the parameter structs (impl/v1/field_checks.py).
//
// Each check throws std::invalid_argument worded as the Python port's ValueError, naming the owner, the field,
// the value and the accepted range: "FullAttentionSpec.block_size must be an int >= 1, got 0". The type half of
// those checks (a bool or a float where an int belongs) is the caller's: C++ values arrive typed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vllm::v1 {

// value >= minimum, else "owner.name must be an int >= minimum, got value".
int64_t CheckInt(const std::string& owner, const std::string& name, int64_t value, int64_t minimum);

// As CheckInt; std::nullopt (unset) passes.
std::optional<int64_t> CheckOptionalInt(const std::string& owner, const std::string& name,
                                        std::optional<int64_t> value, int64_t minimum);

// value one of choices, else "owner.name must be one of [a, b], got value".
int64_t CheckChoice(const std::string& owner, const std::string& name, int64_t value,
                    const std::vector<int64_t>& choices);

// A finite value in (0, 1], else "owner.name must be a finite float in (0, 1], got value".
double CheckFraction(const std::string& owner, const std::string& name, double value);

// "[0, 1, 2]": a list of ints as Python prints it.
std::string PyIntList(const std::vector<int64_t>& values);

}  // namespace vllm::v1
