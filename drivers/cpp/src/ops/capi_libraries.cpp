// Library inputs of the version gate (gates/rows/capi_abi/build.py library): the configured library, or a small
// library compiled here with the system C compiler ($CC, else cc) from a header: the handshake a header's own
// library answers (vllm_abi_version() is VLLM_ABI_VERSION, a zeroed default), or a library with no vllm symbol.
// Builds are cached by content hash under $VLLM_GATES_CACHE_DIR (else a per-user folder of the temp dir).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "capi_common.h"
#include "vllm/entrypoints/json_repr.h"

namespace gates::capi {
namespace {

const char kHandshakeSource[] =
    "#include <stdint.h>\n"
    "#include <string.h>\n"
    "#include \"vllm.h\"\n"
    "int32_t vllm_abi_version(void) { return VLLM_ABI_VERSION; }\n"
    "vllm_model_params vllm_model_params_default(void) {\n"
    "  vllm_model_params params;\n"
    "  memset(&params, 0, sizeof params);\n"
    "  return params;\n"
    "}\n";
const char kForeignSource[] = "int vllm_gates_unrelated(void) { return 0; }\n";

std::string Hex64(uint64_t value) {
  static const char digits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[i] = digits[value & 15];
  return out;
}

uint64_t Fnv1a(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

std::string ShellQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void MakeDirs(const std::string& path) {
  for (size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1))
    mkdir(path.substr(0, at).c_str(), 0755);
  mkdir(path.c_str(), 0755);
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string CacheRoot() {
  if (const char* configured = std::getenv("VLLM_GATES_CACHE_DIR"); configured && *configured) return configured;
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/vllm-gates-cache-" + std::to_string(getuid());
}

// lib<kind>.so compiled from `source` with `header` as vllm.h beside it; cached by the hash of both.
std::string SharedLibrary(const std::string& kind, const std::string& header, const std::string& source) {
  const char* cc_env = std::getenv("CC");
  const std::string cc = cc_env && *cc_env ? cc_env : "cc";
  const std::string flags = "-std=c11 -Wall -Wextra -Werror -pedantic -shared -fPIC";
  const std::string dir =
      CacheRoot() + "/abi-cpp/" + kind + "-" + Hex64(Fnv1a(kind + '\0' + header + '\0' + source + '\0' + flags + cc));
  const std::string output = dir + "/lib" + kind + ".so";
  if (access(output.c_str(), R_OK) == 0) return output;
  MakeDirs(dir);
  Write(dir + "/vllm.h", header);
  Write(dir + "/" + kind + ".c", source);
  const std::string partial = output + ".partial." + std::to_string(getpid());
  const std::string command = ShellQuote(cc) + " " + flags + " -I " + ShellQuote(dir) + " " +
                              ShellQuote(dir + "/" + kind + ".c") + " -o " + ShellQuote(partial) + " 2>&1";
  std::string diagnostics;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run the C compiler " + cc);
  char buffer[512];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) diagnostics.append(buffer, n);
  const int status = pclose(pipe);
  if (status != 0) throw std::runtime_error(cc + " failed on " + kind + ".c (status " + std::to_string(status) + "): " + diagnostics);
  if (std::rename(partial.c_str(), output.c_str()) != 0) throw std::runtime_error("cannot move " + partial);
  return output;
}

}  // namespace

std::optional<std::string> LibraryHeaderOf(const Value& which) {
  if (which == "foreign") return std::nullopt;
  if (which == "configured") return ReadText(ConfiguredHeaderPath());
  if (which == "spec") return ReadText("spec/include/vllm.h");
  if (which.is_object()) {
    const Value* fixture = Find(which, "fixture");
    if (fixture == nullptr || which.size() != 1)
      throw std::invalid_argument("a library given as a mapping is {fixture: NAME}, got " +
                                  vllm::entrypoints::PyJsonRepr(which));
    return FixtureText(*fixture);
  }
  if (!which.is_string()) throw std::invalid_argument("unknown library " + vllm::entrypoints::PyJsonRepr(which));
  return VariantHeader(which.get<std::string>());
}

std::string LibraryPathOf(const Value& which) {
  if (which == "foreign") return SharedLibrary("not_vllm", "", kForeignSource);
  if (which == "configured") {
    if (auto configured = ConfiguredLibraryPath()) return *configured;
  }
  return SharedLibrary("vllm_handshake", *LibraryHeaderOf(which), kHandshakeSource);
}

}  // namespace gates::capi
