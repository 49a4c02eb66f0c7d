"""The engine's C ABI, ``vllm_model_params`` at v16, as a ctypes mirror (spec/c-abi.md; spec/include/vllm.h)."""
from impl.capi.abi import MEMBERS, VLLM_ABI_VERSION, ModelParams, VllmStatus
from impl.capi.convert import engine_params_from_c, model_params_from_engine
from impl.capi.defaults import model_params_default
from impl.capi.errors import AbiHistoryError, AbiVersionMismatch, CapiError, InvalidArgument, ModelLoadFailed
from impl.capi.library import open_library
from impl.capi.load import engine_load

__all__ = [
    "MEMBERS", "VLLM_ABI_VERSION", "ModelParams", "VllmStatus", "engine_params_from_c", "model_params_from_engine",
    "model_params_default", "AbiHistoryError", "AbiVersionMismatch", "CapiError", "InvalidArgument",
    "ModelLoadFailed", "open_library", "engine_load",
]
