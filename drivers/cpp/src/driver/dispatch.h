// Answering one call (docs/worker-protocol.md §5.2, §8): decode the input, run the operation, shape the reply.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "driver/operation.h"
#include "driver/tensor.h"

namespace gates {

// The members of a reply after its id, as JSON text: `"result":{"value":V}`, `"result":{"raised":{...}}` or
// `"error":{"kind":K,"message":S}`. `exact` is set when the text needs the exact-numbers flag. A value holding
// tensors also has `buffers`: their bytes, owned by `value`, to follow the body in order.
struct Reply {
  Reply() = default;
  Reply(std::string members_, bool exact_) : members(std::move(members_)), exact(exact_) {}
  std::string members;
  bool exact = false;
  std::unique_ptr<Value> value;
  std::vector<const Bytes*> buffers;
};

// The audit's stand-in target, answered {"$wrong": true} whatever the input.
constexpr const char* kStandIn = "_vllm_gates.wire.standins:wrong_everywhere";

Reply error_reply(const std::string& kind, const std::string& message);

// A call request ({"operation": S, "input": V} or {"target": kStandIn, ...}), as parsed from the wire (tags not
// yet decoded), with the message's buffers (moved into the input's tensors) and the cap on buffer bytes per
// message both ways. Never throws.
Reply answer_call(const Value& request, std::vector<Bytes>& buffers, std::uint64_t max_buffer_bytes);

// The same without buffers (the --lines mode): a `$tensor` in the input is a protocol error, a tensor in the
// result not-plain.
Reply answer_call(const Value& request);

// A message for JSON: invalid UTF-8 replaced, never throws.
std::string quote_message(const std::string& text);

}  // namespace gates
