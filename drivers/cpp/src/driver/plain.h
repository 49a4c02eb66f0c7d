// Plain data on the wire (docs/worker-protocol.md §7): exact JSON parsing, decoding of the tags into gates::Value,
// and encoding of a gates::Value back into wire JSON text.
#pragma once

#include <stdexcept>
#include <string>

#include "driver/operation.h"

namespace gates {

// Wire data the protocol does not allow: a bad tag, a key collision, nesting too deep, text that is not JSON.
struct ProtocolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A result the protocol cannot carry (reply error kind "not-plain").
struct NotPlain : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The JSON text of one frame or line, parsed exactly: an integer beyond 64 bits stays exact (as {"$int": text}
// once decoded), objects keep their member order, a repeated member name is refused. Tags are not decoded yet.
Value parse_exact(const std::string& text);

// The plain value wire JSON encodes (tags decoded as operation.h describes); ProtocolError names the place,
// rooted at `root` ("input").
Value decode(const Value& wire, const std::string& root = "input");

// Compact wire JSON text of a value; `exact` is set when the text holds an integer outside int64/uint64
// (the frame's exact-numbers flag must then be set).
std::string encode(const Value& value, bool& exact);

// A string as a JSON string literal (UTF-8 kept, not escaped to \u).
std::string quote(const std::string& text);

}  // namespace gates
