#include "driver/dispatch.h"

#include <stdexcept>
#include <string>

#include "driver/plain.h"

namespace gates {

std::string quote_message(const std::string& text) {
  return Value(text).dump(-1, ' ', false, Value::error_handler_t::replace);
}

Reply error_reply(const std::string& kind, const std::string& message) {
  return {"\"error\":{\"kind\":" + quote_message(kind) + ",\"message\":" + quote_message(message.substr(0, 4000)) + "}",
          false};
}

namespace {

Reply raised_reply(const std::string& kind, const std::string& message) {
  std::string mro;
  for (const auto& name : kind_lineage(kind)) mro += (mro.empty() ? "" : ",") + quote_message(name);
  return {"\"result\":{\"raised\":{\"type\":" + quote_message(kind) + ",\"mro\":[" + mro + "],\"message\":" +
              quote_message(message) + "}}",
          false};
}

std::string text_member(const Value& request, const char* name) {
  auto it = request.find(name);
  return it != request.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

namespace {

// answer_call, with null `buffers` in the --lines mode.
Reply answer(const Value& request, std::vector<Bytes>* buffers, std::uint64_t max_buffer_bytes) {
  static const Value kNoInput;
  try {
    if (!request.is_object()) return error_reply("protocol", "a call must be a JSON object");
    if (text_member(request, "target") == kStandIn) return {"\"result\":{\"value\":{\"$wrong\":true}}", false};
    std::string name = text_member(request, "operation");
    if (name.empty()) {
      std::string target = text_member(request, "target");
      return error_reply("not-implemented", "the call names no operation" + (target.empty() ? std::string() : " (target " + target + ")") +
                                                 "; the C++ driver answers operations only");
    }
    const Operation* operation = find_operation(name);
    if (operation == nullptr) return error_reply("not-implemented", "the C++ driver has no operation '" + name + "'");
    Value input;
    try {
      auto it = request.find("input");
      const Value& wire = it == request.end() ? kNoInput : *it;
      input = buffers ? decode(wire, "input", *buffers, max_buffer_bytes) : decode(wire, "input");
    } catch (const ProtocolError& e) {
      return error_reply("protocol", e.what());
    }
    Value result;
    try {
      result = (*operation)(input);
    } catch (const Raised& e) {
      return raised_reply(e.kind, e.what());
    } catch (const std::invalid_argument& e) {
      return raised_reply("invalid-argument", e.what());
    } catch (const std::out_of_range& e) {
      return raised_reply("invalid-argument", e.what());
    } catch (const std::exception& e) {
      return error_reply("worker", std::string("operation '") + name + "' failed: " + e.what());
    } catch (...) {
      return error_reply("worker", std::string("operation '") + name + "' threw something that is not a std::exception");
    }
    Reply reply;
    reply.value = std::make_unique<Value>(std::move(result));
    try {
      std::string text = buffers ? encode(*reply.value, reply.exact, reply.buffers, max_buffer_bytes)
                                 : encode(*reply.value, reply.exact);
      reply.members = "\"result\":{\"value\":" + text + "}";
    } catch (const NotPlain& e) {
      return error_reply("not-plain", e.what());
    }
    return reply;
  } catch (const std::exception& e) {
    return error_reply("worker", e.what());
  } catch (...) {
    return error_reply("worker", "the call failed in the driver");
  }
}

}  // namespace

Reply answer_call(const Value& request, std::vector<Bytes>& buffers, std::uint64_t max_buffer_bytes) {
  return answer(request, &buffers, max_buffer_bytes);
}

Reply answer_call(const Value& request) { return answer(request, nullptr, 0); }

}  // namespace gates
