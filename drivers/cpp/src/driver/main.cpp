// vllm-gates-cpp: the C++ implementation's worker (docs/worker-protocol.md).
//   vllm-gates-cpp --fd N                 serve the judge over the inherited socket N
//   vllm-gates-cpp --lines [--setting K=V]  one JSON request per stdin line, one reply per stdout line
//   vllm-gates-cpp --list                 the operation names, one a line
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fcntl.h>

#include "driver/operation.h"
#include "driver/registry_internal.h"
#include "driver/server.h"

namespace {

int usage() {
  std::fprintf(stderr, "usage: vllm-gates-cpp --fd N | --lines [--setting NAME=VALUE]... | --list\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  if (!gates::duplicate_operation_names().empty()) {
    for (const auto& name : gates::duplicate_operation_names())
      std::fprintf(stderr, "vllm-gates-cpp: operation '%s' is registered twice\n", name.c_str());
    return 1;
  }
  int fd = -1;
  bool lines = false;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--fd" && i + 1 < argc) {
      char* end = nullptr;
      long value = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || value < 0 || value > 1 << 20) return usage();
      fd = static_cast<int>(value);
    } else if (arg == "--lines") {
      lines = true;
    } else if (arg == "--list") {
      list = true;
    } else if (arg == "--setting" && i + 1 < argc) {
      std::string pair = argv[++i];
      auto eq = pair.find('=');
      if (eq == std::string::npos) return usage();
      gates::set_setting(pair.substr(0, eq), pair.substr(eq + 1));
    } else {
      return usage();
    }
  }
  if (list) {
    for (const auto& name : gates::operation_names()) std::printf("%s\n", name.c_str());
    return 0;
  }
  if (lines) return gates::serve_lines();
  if (fd < 0) return usage();
  if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    std::perror("vllm-gates-cpp: --fd");
    return 2;
  }
  return gates::serve(fd);
}
