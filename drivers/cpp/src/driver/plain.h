// Plain data on the wire (docs/worker-protocol.md §7): exact JSON parsing, decoding of the tags into gates::Value,
// and encoding of a gates::Value back into wire JSON text.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "driver/operation.h"
#include "driver/tensor.h"

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
// rooted at `root` ("input"). This one has no buffers: a `$tensor` is refused.
Value decode(const Value& wire, const std::string& root = "input");

// The same with the message's buffers: each `$tensor` (tensor.h) takes the buffer it names, moved out of
// `buffers`; a `$tensor` that breaks the contract, a buffer named twice or used by no `$tensor` is a ProtocolError.
Value decode(const Value& wire, const std::string& root, std::vector<Bytes>& buffers, std::uint64_t max_buffer_bytes);

// Compact wire JSON text of a value; `exact` is set when the text holds an integer outside int64/uint64
// (the frame's exact-numbers flag must then be set). NotPlain names the place (`result[0]["x"]`). This one has no
// buffers: a tensor is NotPlain.
std::string encode(const Value& value, bool& exact);

// The same with tensors: each becomes a `$tensor` tag and its bytes (by address, owned by `value`) are appended to
// `buffers`; more than 4096 tensors or bytes past `max_buffer_bytes` are NotPlain naming the tensor's place.
std::string encode(const Value& value, bool& exact, std::vector<const Bytes*>& buffers, std::uint64_t max_buffer_bytes);

// A string as a JSON string literal (UTF-8 kept, not escaped to \u).
std::string quote(const std::string& text);

}  // namespace gates
