#include "driver/server.h"

#include <cstdio>
#include <iostream>
#include <string>

#include <unistd.h>

#include "driver/dispatch.h"
#include "driver/framing.h"
#include "driver/plain.h"
#include "driver/registry_internal.h"

namespace gates {
namespace {

std::string names_json() {
  std::string out = "[";
  for (const auto& name : operation_names()) out += (out.size() > 1 ? "," : "") + quote_message(name);
  return out + "]";
}

void write_text(int fd, const std::string& body, bool exact = false, const std::vector<const Bytes*>& buffers = {}) {
  if (body.size() > kMaxFrame) {
    write_frame(fd, "{" + error_reply("worker", "the reply is over the frame limit of 268435456 bytes").members + "}", false);
    return;
  }
  write_frame(fd, body, exact, buffers);
}

// Hello's settings: a JSON object of names to strings (a $map-encoded one is decoded first).
Value settings_of(const Value& hello) {
  auto it = hello.find("settings");
  if (it == hello.end()) return Value::object();
  try {
    Value decoded = decode(*it, "settings");
    return decoded.is_object() ? decoded : Value::object();
  } catch (const ProtocolError&) {
    return it->is_object() ? *it : Value::object();
  }
}

// Hello's max_buffer_bytes (wire-v2 "Frame"): an int >= 0, kDefaultMaxBufferBytes when absent. Empty text means
// the value is usable, else it says what is wrong.
std::string buffer_cap_problem(const Value& hello, std::uint64_t& cap) {
  auto it = hello.find("max_buffer_bytes");
  if (it == hello.end()) return std::string();
  if (it->is_number_unsigned() || (it->is_number_integer() && it->get<std::int64_t>() >= 0)) {
    cap = it->get<std::uint64_t>();
    return std::string();
  }
  return "its max_buffer_bytes is " + it->dump(-1, ' ', false, Value::error_handler_t::replace).substr(0, 100) +
         ", not an int >= 0";
}

// The refusal's reason (wire-v2 "Handshake": naming both versions), or empty text for a hello this worker takes.
std::string refusal(const Value& hello, const std::string& text, std::uint64_t& cap) {
  auto op = hello.is_object() ? hello.find("op") : hello.end();
  if (!hello.is_object() || op == hello.end() || *op != "hello")
    return "expected hello version " + std::to_string(kProtocolVersion) + ", got " + text.substr(0, 300);
  const std::string speaks = "this worker speaks protocol version " + std::to_string(kProtocolVersion);
  auto version = hello.find("version");
  if (version == hello.end() || !version->is_number_integer())
    return speaks + "; the judge's hello gives no version number: " + text.substr(0, 300);
  if (*version != kProtocolVersion) return speaks + "; the judge sent version " + version->dump();
  std::string cap_problem = buffer_cap_problem(hello, cap);
  return cap_problem.empty() ? cap_problem : "the judge's hello is refused: " + cap_problem;
}

// Returns whether the worker is ready, and the hello's cap on buffer bytes per message.
bool handshake(int fd, std::uint64_t& cap) {
  Frame frame = read_frame(fd, cap);
  std::string reason;
  Value hello;
  try {
    hello = parse_exact(frame.body);
    reason = refusal(hello, frame.body, cap);
  } catch (const ProtocolError&) {
    reason = refusal(Value(), frame.body, cap);
  }
  if (reason.empty() && !frame.buffers.empty()) reason = "the judge's hello carries buffers; only a call's input holds tensors";
  // The judge starts an implementation's worker in a scratch folder (docs/worker-protocol.md §2.2); the settings'
  // paths and the rows' input files this driver reads are relative to the project root hello names, so it moves
  // there (under Landlock it still reads only what the implementation's `reads` declares, and writes nothing there).
  auto root = reason.empty() ? hello.find("root") : hello.end();
  if (reason.empty() && root != hello.end() && root->is_string() && ::chdir(root->get<std::string>().c_str()) != 0)
    reason = "cannot enter the project root " + root->get<std::string>().substr(0, 300) + " that hello names";
  if (!reason.empty()) {
    write_text(fd, "{\"op\":\"refused\",\"reason\":" + quote_message(reason) + "}");
    return false;
  }
  set_settings(settings_of(hello));
  write_text(fd, "{\"op\":\"ready\",\"version\":" + std::to_string(kProtocolVersion) + ",\"pid\":" + std::to_string(::getpid()) +
                     ",\"language\":\"c++\",\"operations\":" + names_json() + "}");
  return true;
}

// A check (§5.1): the driver has no targets to resolve; entries that name an operation it lacks are problems.
std::string check_members(const Value& request) {
  std::string problems;
  auto targets = request.find("targets");
  if (targets != request.end() && targets->is_array()) {
    for (const auto& entry : *targets) {
      auto op = entry.is_object() ? entry.find("operation") : entry.end();
      if (!entry.is_object() || op == entry.end() || !op->is_string() || find_operation(op->get<std::string>())) continue;
      auto key = entry.find("key");
      problems += std::string(problems.empty() ? "" : ",") + "{\"key\":" + (key != entry.end() ? key->dump() : "null") +
                  ",\"message\":" + quote_message("the C++ driver has no operation '" + op->get<std::string>() + "'") + "}";
    }
  }
  return "\"result\":{\"problems\":[" + problems + "]}";
}

std::string id_text(const Value& request) {
  auto id = request.find("id");
  if (id == request.end() || !id->is_number_integer()) return "null";
  return id->dump();
}

}  // namespace

int serve(int fd) {
  try {
    std::uint64_t cap = kDefaultMaxBufferBytes;
    if (!handshake(fd, cap)) return 2;
    for (;;) {
      Frame frame = read_frame(fd, cap);
      Value request;
      try {
        request = parse_exact(frame.body);
      } catch (const ProtocolError& e) {
        std::fprintf(stderr, "vllm-gates-cpp: a frame that is not a JSON object: %s\n", e.what());
        return 3;
      }
      if (!request.is_object()) {
        std::fprintf(stderr, "vllm-gates-cpp: a frame that is not a JSON object\n");
        return 3;
      }
      auto op = request.find("op");
      std::string name = op != request.end() && op->is_string() ? op->get<std::string>() : std::string();
      if (name == "bye") return 0;
      std::string head = "{\"id\":" + id_text(request) + ",";
      if (name == "call") {
        Reply reply = answer_call(request, frame.buffers, cap);
        write_text(fd, head + reply.members + "}", reply.exact, reply.buffers);
      } else if (!frame.buffers.empty()) {
        write_text(fd, head + error_reply("protocol", "a request of op " + (op == request.end() ? std::string("(none)") : op->dump()) +
                                                          " carries " + std::to_string(frame.buffers.size()) +
                                                          " buffers; only a call's input holds tensors").members + "}");
      } else if (name == "check") {
        write_text(fd, head + check_members(request) + "}");
      } else {
        write_text(fd, head + error_reply("protocol", "unknown op " + (op == request.end() ? std::string("(none)") : op->is_string() ? "'" + name + "'" : op->dump())).members + "}");
      }
    }
  } catch (const ChannelClosed&) {
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vllm-gates-cpp: %s\n", e.what());
    return 3;
  }
}

int serve_lines() {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Reply reply;
    try {
      reply = answer_call(parse_exact(line));
    } catch (const ProtocolError& e) {
      reply = error_reply("protocol", e.what());
    }
    std::cout << "{" << reply.members << "}\n" << std::flush;
  }
  return 0;
}

}  // namespace gates
