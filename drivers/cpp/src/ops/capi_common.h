// Shared pieces of the CAPI-ABI operation adapters (gates/rows/capi_abi/operations.yaml): error kinds, the
// implementation's settings (header, library), the header and library inputs the Python builders turn into text
// and compiled libraries (gates/rows/capi_abi/build.py), and the plain views of structs and EngineParams
// (gates/rows/capi_abi/subjects.py member_values, describe).
#pragma once

#include <optional>
#include <string>

#include "../driver/operation.h"
#include "vllm/capi/convert.h"
#include "vllm/v1/kv_cache_interface.h"

namespace gates::capi {

// Runs an operation body: AbiHistoryError -> abi-history, AbiVersionMismatch -> abi-version, the other
// std::invalid_argument / out_of_range / overflow_error -> invalid-argument, any other runtime_error ->
// runtime-error.
Value Guarded(const Operation& body, const Value& input);

// The "header" setting (default spec/include/vllm.h) and the "library" setting (empty: none), relative to the
// project root, the worker's working directory.
std::string ConfiguredHeaderPath();
std::optional<std::string> ConfiguredLibraryPath();

std::string ReadText(const std::string& path);
// fixtures/NAME of the row (a plain file name); KeyError-like invalid-argument otherwise.
std::string FixtureText(const Value& name);

// A *header* input ({header: spec|configured}, {fixture}, {variant}, {members, abi_version, history, style}) as
// header text, rendered as build.py renders it.
std::string HeaderOf(const Value& input);
// A header-history variant (v16, v15, v17-appended, inserted-mid-struct, ...) rendered from the v16 members.
std::string VariantHeader(const std::string& name);
// The header text a *library* input's library is built from; nullopt for foreign.
std::optional<std::string> LibraryHeaderOf(const Value& which);
// The path of the library a *library* input names, compiled with the system C compiler when it must be.
std::string LibraryPathOf(const Value& which);

// The input must be an empty map (build.py no_arguments).
void NoArguments(const Value& input);

// Member values of a struct in declaration order: text or null, ints, a double.
Value MemberValues(const vllm_model_params& params);
// Every EngineParams field plus gpu_memory_utilization_is_explicit.
Value Describe(const vllm::entrypoints::EngineParams& params);

// A PROBE {layers, num_kv_heads, head_size, block_size, dtype} as one full-attention group (build.py probe_config);
// absent: {layers: 2, num_kv_heads: 2, head_size: 64, block_size: 16, dtype: float32}.
vllm::v1::KVCacheConfig ProbeConfig(const Value* probe);

// A mapping member or nullptr; map keys may come tagged ({"$map": [[k, v], ...]}).
const Value* Find(const Value& object, const std::string& name);

}  // namespace gates::capi

#define GATES_CAPI_OPERATION(name, ...)                                                         \
  GATES_OPERATION(name, [](const ::gates::Value& input) -> ::gates::Value {                     \
    return ::gates::capi::Guarded(::gates::Operation(__VA_ARGS__), input);                      \
  })
