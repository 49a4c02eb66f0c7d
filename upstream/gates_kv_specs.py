"""vLLM 0.33.0's KV-spec page sizes and max memory usage in the shapes of the ROAD-V1-MEM operations page-size-bytes
and max-memory-usage-bytes (gates/rows/road_v1_mem/operations.yaml), for the upstream gates of gate.yaml.

- ``page_size_bytes``: ``upstream.kv_specs.page_size_bytes`` in its backend layout (what vLLM allocates for such a
  layer); vLLM's refusals, bare ``assert`` statements, as ``ValueError``: a padded page below the real page
  (``page_size_bytes``, vllm/v1/kv_cache_interface.py) and NVFP4 with unequal K and V widths (FlashInfer's
  ``customize_spec``, vllm/v1/attention/backends/flashinfer.py). Agreeing gate: ``kv-page-size:upstream``.
- ``page_size_as_declared``: the checking view of the KV-spec deviations in spec/deviations.yaml. It first asserts
  that vLLM still builds the SPEC as the deviation declares (a page where the port refuses, or a raw dataclass page
  that differs from the backend's), then answers with the port's declared outcome: the refusal (``ValueError``, or
  ``TypeError`` where the port refuses a type or an unknown field) or vLLM's backend page. A declaration that no longer
  holds raises ``AssertionError`` naming it, which no implementation's answer agrees with.
- ``max_memory_usage_bytes``: ``upstream.kv_specs.max_memory_usage_bytes`` on a real VllmConfig whose
  ``mamba_cache_mode`` is the SPEC's; ``CacheConfig``'s refusal of a mode (pydantic's ``ValidationError``) as
  ``ValueError``. Agreeing gate: ``upstream-kv-max-memory-usage``.

vLLM (through upstream.kv_specs) is imported on the first call, not on import (see upstream/gates_mem.py).
"""
from __future__ import annotations

from typing import Any, Mapping

import upstream  # noqa: F401  (environment before vLLM's import)

_CLASS = {"full": "FullAttentionSpec", "mla": "MLAAttentionSpec", "sliding_window": "SlidingWindowSpec",
          "chunked_local": "ChunkedLocalAttentionSpec", "mamba": "MambaSpec"}
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
_LAID_OUT = ("NONE", "FP8_PER_TENSOR", "INT8_PER_TOKEN_HEAD", "FP8_PER_TOKEN_HEAD", "NVFP4")
_PER_TOKEN_HEAD = ("INT8_PER_TOKEN_HEAD", "FP8_PER_TOKEN_HEAD")
_FP8_DS_MLA_ENTRY = 656  # bytes a token, set by MLAAttention.get_kv_cache_spec (mla_attention.py)


def _specs() -> Any:
    from upstream import kv_specs

    return kv_specs


def _refused(spec: Mapping[str, Any], exc: AssertionError) -> ValueError:
    """vLLM's bare assertion as the operation's refusal, naming vLLM's real page where a padded page is below it."""
    padded = spec.get("page_size_padded")
    if padded is not None:
        unpadded = {key: value for key, value in spec.items() if key != "page_size_padded"}
        try:
            real = _specs().real_page_size_bytes(unpadded)
        except AssertionError:
            real = None
        if real is not None and padded < real:
            return ValueError(f"{_CLASS.get(spec.get('kind'), 'spec')}.page_size_padded must be >= the real page "
                              f"size {real}, got {padded} (vLLM 0.33.0: AssertionError)")
    return ValueError(f"vLLM 0.33.0 refuses the spec {dict(spec)!r}: AssertionError {exc}")


def page_size_bytes(spec: Mapping[str, Any]) -> int:
    """vLLM's page (backend layout) of ``spec``; its assertions as ``ValueError``."""
    try:
        return _specs().page_size_bytes(spec)
    except AssertionError as exc:
        raise _refused(spec, exc) from exc


def max_memory_usage_bytes(spec: Mapping[str, Any], max_model_len: int,
                           max_num_batched_tokens: int | None = None) -> int:
    """vLLM's ``max_memory_usage_bytes`` of ``spec`` with the SPEC's ``mamba_cache_mode`` as the config's; a refused
    mode, or a refused spec, as ``ValueError``."""
    try:
        return _specs().max_memory_usage_bytes(spec, max_model_len, max_num_batched_tokens)
    except AssertionError as exc:
        raise _refused(spec, exc) from exc
    except ValueError as exc:  # pydantic's ValidationError of CacheConfig(mamba_cache_mode=...) is a ValueError
        raise ValueError(f"vLLM 0.33.0 refuses the config: {exc}") from None


# ------------------------------------------------------------------------------------------------ declared deviations


def _stale(deviation: str, spec: Mapping[str, Any], declared: str, got: object) -> AssertionError:
    return AssertionError(f"spec/deviations.yaml {deviation} no longer holds: vLLM {upstream.installed_version()} was declared to {declared} "
                          f"for {dict(spec)!r}, but gave {got!r}")


def _outcome(spec: Mapping[str, Any], layout: str = "backend") -> dict[str, Any]:
    try:
        return {"value": _specs().page_size_bytes(spec, layout)}
    except Exception as exc:  # noqa: BLE001 - any refusal is an outcome to compare with the declaration
        return {"error": type(exc).__name__, "message": str(exc)}


def _builds(deviation: str, spec: Mapping[str, Any], expected: int | None = None) -> None:
    """Assert vLLM builds ``spec`` (to the page ``expected`` when given)."""
    got = _outcome(spec)
    if "error" in got or (expected is not None and got["value"] != expected):
        raise _stale(deviation, spec, "build a page" + ("" if expected is None else f" of {expected} bytes"), got)


def _bad_int(spec: Mapping[str, Any]) -> tuple[str, Any] | None:
    """The first int field the port refuses (a bool, or below its minimum), in the port's checking order."""
    minimum = {"block_size": 1, "num_kv_heads": 1, "head_size": 1, "page_size_padded": 1, "head_size_v": 1,
               "sliding_window": 1, "attention_chunk_size": 1}
    for name, least in minimum.items():
        if name not in spec or spec[name] is None:
            continue
        if name == "head_size_v" and spec["kind"] == "mla":
            least = 0
        value = spec[name]
        if isinstance(value, bool) or value < least:
            return name, value
    return None


def _unquantized_page(spec: Mapping[str, Any]) -> int:
    """The page of the SPEC's fields as vLLM's raw dataclasses size it: bs * H * (K + V widths) * dtype size, V being
    0 for MLA (vllm/v1/kv_cache_interface.py AttentionSpec.state_content_size_bytes)."""
    width = spec["head_size"]
    v_width = spec.get("head_size_v", 0 if spec["kind"] == "mla" else width)
    return spec["block_size"] * spec["num_kv_heads"] * (width + v_width) * _ITEMSIZE[spec["dtype"]]


def page_size_as_declared(spec: Mapping[str, Any]) -> int:
    """The KV-spec deviations (spec/deviations.yaml), checked against vLLM on ``spec``, then the port's declared
    outcome: the refusal, or vLLM's backend page where only the raw dataclass differs."""
    kind = spec["kind"]
    if kind == "mamba":
        raise AssertionError(f"page_size_as_declared: {dict(spec)!r} is a Mamba spec, read alike; not a deviation case")
    owner = _CLASS[kind]
    mode = spec.get("kv_quant_mode", "NONE")
    cache_str = spec.get("cache_dtype_str")
    bad = _bad_int(spec)
    if bad is not None:
        # kv-spec-field-checks: vLLM's dataclasses take a bool or a count below its minimum as given.
        _builds("kv-spec-field-checks", spec)
        error = TypeError if isinstance(bad[1], bool) else ValueError
        raise error(f"{owner}.{bad[0]} must be an int >= 1, got {bad[1]!r} (declared: kv-spec-field-checks)")
    if kind == "full" and spec.get("sliding_window") is not None and spec.get("attention_chunk_size") is not None:
        _builds("kv-spec-field-checks", spec)
        raise ValueError(f"{owner} sets both sliding_window and attention_chunk_size (declared: kv-spec-field-checks)")
    if kind in ("sliding_window", "chunked_local") and "head_size_v" in spec:
        _builds("kv-spec-field-checks", spec, None if mode != "NONE" else _unquantized_page(spec))
        raise TypeError(f"{owner}.__init__() got an unexpected keyword argument 'head_size_v' "
                        "(declared: kv-spec-field-checks)")
    if mode != "NONE" and _ITEMSIZE[spec["dtype"]] != 1:
        # kv-spec-quant-one-byte-dtype: vLLM sizes the page with the given element dtype.
        _builds("kv-spec-quant-one-byte-dtype", spec)
        raise ValueError(f"{owner}.dtype must be a 1-byte dtype with kv_quant_mode={mode} (declared)")
    if mode not in _LAID_OUT:
        # kv-spec-quant-modes-without-layout: vLLM builds a page (Triton's or the raw one) for every member.
        _builds("kv-spec-quant-modes-without-layout", spec)
        raise ValueError(f"{owner}.kv_quant_mode {mode} has no page layout in this port (declared)")
    if mode == "NVFP4" and kind != "full":
        # kv-spec-nvfp4-full-attention-only: vLLM packs it on sliding/chunked layers, leaves an MLA latent unpacked.
        expected = _unquantized_page(spec) if kind == "mla" else None
        _builds("kv-spec-nvfp4-full-attention-only", spec, expected)
        raise ValueError(f"{owner}.kv_quant_mode NVFP4 is only laid out for FullAttentionSpec (declared)")
    if kind == "mla" and spec.get("head_size_v"):
        # kv-spec-mla-head-size-v: vLLM adds the V width to the latent's page (per-token-head: the backend drops it).
        expected = None if mode in _PER_TOKEN_HEAD or cache_str in ("fp8_ds_mla", "nvfp4_ds_mla") else \
            _unquantized_page(spec)
        _builds("kv-spec-mla-head-size-v", spec, expected)
        raise ValueError(f"{owner}.head_size_v must be 0 (declared: kv-spec-mla-head-size-v)")
    if mode == "NVFP4" and (spec["head_size"] % 16 or spec.get("head_size_v", spec["head_size"]) % 16):
        # kv-spec-nvfp4-width-multiple-of-16: vLLM floors w/2 + w/16.
        _builds("kv-spec-nvfp4-width-multiple-of-16", spec)
        raise ValueError(f"{owner}: NVFP4 head widths must be multiples of 16 (declared)")
    if kind == "mla" and cache_str == "fp8_ds_mla" and (
            spec["head_size"] != 576 or spec["num_kv_heads"] != 1 or _ITEMSIZE[spec["dtype"]] != 1):
        # kv-spec-fp8-ds-mla-fields: MLAAttention.get_kv_cache_spec fixes one head and uint8, and the entry's 656 bytes.
        _builds("kv-spec-fp8-ds-mla-fields", spec, spec["block_size"] * _FP8_DS_MLA_ENTRY)
        raise ValueError(f"{owner}: fp8_ds_mla needs head_size 576, one KV head and a 1-byte dtype (declared)")
    if mode in ("NVFP4",) + _PER_TOKEN_HEAD or cache_str == "fp8_ds_mla":
        # kv-spec-layout-from-mode: vLLM's raw dataclass ignores the mode; the layer and the backend set the layout.
        raw, backend = _outcome(spec, "raw"), _outcome(spec)
        if spec.get("page_size_padded") is None:
            if raw != {"value": _unquantized_page(spec)} or "error" in backend or backend == raw:
                raise _stale("kv-spec-layout-from-mode", spec,
                             f"size the raw dataclass as unquantized ({_unquantized_page(spec)}) and the backend's "
                             "layout apart from it", {"raw": raw, "backend": backend})
        if "error" in backend:
            raise _stale("kv-spec-layout-from-mode", spec, "build the backend's layout", backend)
        return backend["value"]
    raise AssertionError(f"page_size_as_declared: {dict(spec)!r} is read alike; not a deviation case")
