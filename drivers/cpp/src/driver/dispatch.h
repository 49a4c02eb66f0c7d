// Answering one call (docs/worker-protocol.md §5.2, §8): decode the input, run the operation, shape the reply.
#pragma once

#include <string>

#include "driver/operation.h"

namespace gates {

// The members of a reply after its id, as JSON text: `"result":{"value":V}`, `"result":{"raised":{...}}` or
// `"error":{"kind":K,"message":S}`. `exact` is set when the text needs the exact-numbers flag.
struct Reply {
  std::string members;
  bool exact = false;
};

// The audit's stand-in target, answered {"$wrong": true} whatever the input.
constexpr const char* kStandIn = "_vllm_gates.standins:wrong_everywhere";

Reply error_reply(const std::string& kind, const std::string& message);

// A call request ({"operation": S, "input": V} or {"target": kStandIn, ...}), as parsed from the wire (tags not
// yet decoded). Never throws.
Reply answer_call(const Value& request);

// A message for JSON: invalid UTF-8 replaced, never throws.
std::string quote_message(const std::string& text);

}  // namespace gates
