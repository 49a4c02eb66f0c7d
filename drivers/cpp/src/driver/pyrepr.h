// Python's repr() and type name of a decoded plain value, for error messages that must carry the same facts as
// the Python port's (`got True (bool)`, `got '2' (str)`, `kind='xp'`). A decoded tuple is an array, so it is
// written as a list.
#pragma once

#include <string>

#include "driver/operation.h"

namespace gates {

std::string py_repr(const Value& value);
std::string py_type_name(const Value& value);
// repr() of a double: shortest round-trip text, "2.0", "1e+16", "nan", "inf".
std::string py_float_repr(double x);
// repr() of a str: single quotes unless the text holds ' and no ", with Python's escapes.
std::string py_str_repr(const std::string& text);

// Whether a decoded value is a Python int (not a bool): a JSON integer or {"$int": text}.
bool is_py_int(const Value& value);

}  // namespace gates
