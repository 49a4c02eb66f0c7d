// Open an engine library with dlopen and check its ABI version before anything else (spec/c-abi.md CAPI-8.1 to
// CAPI-8.3; the version handshake of the C++ port's tests/capi/test_dlopen.cpp and its FFI consumers; ported from
// impl/capi/library.py). A refusal says whether vllm_model_params differs only when the library's header tells.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include "vllm/capi/abi.h"

namespace vllm::capi {

// A library of another ABI version, or no vllm C ABI library at all (the Python port's AbiVersionMismatch).
struct AbiVersionMismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A library that could not be loaded at all (dlopen failed): a runtime error.
struct LibraryLoadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class CapiLibrary {
 public:
  CapiLibrary(const CapiLibrary&) = delete;
  CapiLibrary& operator=(const CapiLibrary&) = delete;
  CapiLibrary(CapiLibrary&& other) noexcept;
  ~CapiLibrary();

  // dlopen `path` (RTLD_NOW | RTLD_LOCAL), read vllm_abi_version() and refuse another version than `expected`.
  // `header_text`, the header the library was built from, lets the refusal say whether the layouts differ.
  static CapiLibrary Open(const std::string& path, int expected = kAbiVersion,
                          const std::optional<std::string>& header_text = std::nullopt);

  int abi_version() const { return abi_version_; }
  // The library's vllm_model_params_default(), returned by value into this binding's struct.
  vllm_model_params ModelParamsDefault() const;

 private:
  CapiLibrary(void* handle, int abi_version) : handle_(handle), abi_version_(abi_version) {}
  void* handle_ = nullptr;
  int abi_version_ = 0;
};

// What the library's header says about vllm_model_params in v`reported` against this binding's struct.
std::string LayoutVerdict(const std::optional<std::string>& header_text, int reported, int expected = kAbiVersion);

// The ABI version of the library at `path`, if it is this binding's; AbiVersionMismatch otherwise.
int CheckedAbiVersion(const std::string& path, const std::optional<std::string>& header_text = std::nullopt);

}  // namespace vllm::capi
