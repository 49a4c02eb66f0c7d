"""Thin views of vLLM 0.33.0 for the ROAD-V1-MEM upstream gates (gates/rows/road_v1_mem/gate.yaml), in the shapes of
the row's operations (operations.yaml: parse-size, kv-quant-modes, kv-quant-mode-of).

- ``parse_size``: ``human_readable_int`` (vllm/utils/argparse_utils.py) with the row's signature; on the texts both
  read (vLLM's own syntax), the agreeing gate ``size-parsing:upstream``.
- ``size_as_declared``: the checking view of the size-parser deviations in spec/deviations.yaml. It first asserts
  that vLLM still reads the text as each deviation declares (a refusal of an explicit unit, the float product of a
  decimal, Python's ``int()`` of a signed text ...), then answers with vLLM's own reading of the same quantity in
  vLLM's syntax ("4GiB" -> ``human_readable_int("4G")``, "1.005k" -> ``human_readable_int("1005")``), or with the
  refusal the deviation declares for us. A declaration that no longer holds raises ``AssertionError`` naming it,
  which no implementation's answer agrees with: the checking gate fails and the deviation shows up as stale.
- ``quant_modes`` / ``quant_mode_of``: ``KVQuantMode`` and ``get_kv_quant_mode`` (vllm/v1/kv_cache_interface.py).
- ``estimate_max_model_len``: ``upstream.kv_fit``'s, unchanged (vllm/v1/core/kv_cache_planning.py).

vLLM (and the adapter modules that import it) is imported on the first call, not on import: the harness resolves
every gate's targets when it loads the gate file, also where vLLM is not installed and the upstream gates are
SKIPPED.
"""
from __future__ import annotations

import argparse
import re
from typing import Any

import upstream  # noqa: F401  (environment before vLLM's import)


def human_readable_int(text: str) -> int:
    """vLLM's ``human_readable_int`` (vllm/utils/argparse_utils.py), imported on first use."""
    from vllm.utils.argparse_utils import human_readable_int as parse

    return parse(text)

# ------------------------------------------------------------------------------------------------ parse-size


def parse_size(text: str, what: str = "--kv-cache-memory") -> int:
    """``human_readable_int(text)``; its refusals as ``ValueError``: the binary-fraction refusal is an
    ``argparse.ArgumentTypeError``, which argparse's ``type=`` reports as it reports a ``ValueError`` (a usage error
    naming the flag), so the port's ``ValueError`` is the same outcome. ``what`` is the row operation's flag name,
    which vLLM's function does not take."""
    try:
        return int(human_readable_int(text))
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"{what}: {exc}") from exc


_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
# explicit unit -> vLLM's one-letter suffix of the same scale
_EXPLICIT = {"KB": "k", "MB": "m", "GB": "g", "TB": "t", "KiB": "K", "MiB": "M", "GiB": "G", "TiB": "T"}
_UNIT_TEXT = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]+)?)(?P<space> *)(?P<unit>[A-Za-z]+)")


def _stale(deviation: str, text: str, declared: str, got: object) -> AssertionError:
    return AssertionError(f"spec/deviations.yaml {deviation} no longer holds: vLLM {upstream.installed_version()}'s human_readable_int({text!r}) "
                          f"was declared to {declared}, but gave {got!r}")


def _outcome(text: str) -> dict[str, Any]:
    """``upstream.sizes.outcome``'s shape, with an ``OverflowError`` (a float product of a huge decimal) counted as
    a refusal too."""
    try:
        return {"value": int(human_readable_int(text))}
    except (ValueError, argparse.ArgumentTypeError, TypeError, OverflowError) as exc:
        return {"error": type(exc).__name__, "message": str(exc)}


def _shift(number: str, scale: int) -> str:
    """``number`` (DIGITS[.DIGITS]) times ``scale`` (a power of ten) as plain digits, by moving the decimal point:
    the same quantity in vLLM's plain-bytes syntax (None when it is not a whole number)."""
    whole, _, frac = number.partition(".")
    places = len(str(scale)) - 1
    if len(frac.rstrip("0")) > places:
        return ""
    digits = (whole + frac.ljust(places, "0")[:places]).lstrip("0")
    return digits or "0"


def size_as_declared(text: str, what: str = "--kv-cache-memory") -> int:
    """The size-parser deviations (spec/deviations.yaml), checked against vLLM on ``text``, then vLLM's reading of
    the same quantity in its own syntax, or the refusal declared for the port (``ValueError``)."""
    raw = _outcome(text)
    body = text.strip()
    match = _UNIT_TEXT.fullmatch(body)
    if match is None:
        try:
            as_int = int(body)
        except ValueError:
            raise AssertionError(f"size_as_declared: {text!r} is not a text of a declared size-parser deviation") from None
        if re.fullmatch(r"[0-9]+", body):
            raise AssertionError(f"size_as_declared: {text!r} is plain bytes, read alike; not a deviation case")
        # size-plain-int-syntax: vLLM falls back to int(); we take ASCII digits only.
        if raw != {"value": as_int}:
            raise _stale("size-plain-int-syntax", text, f"read it as int({body!r}) = {as_int}", raw)
        raise ValueError(f"{what}: {text!r}: signs, underscores and non-ASCII digits are not a size (declared)")
    number, space, unit = match["number"], match["space"], match["unit"]
    if unit in _EXPLICIT or space:
        # size-explicit-units: vLLM reads one-letter suffixes only, with no space before them.
        if "error" not in raw:
            raise _stale("size-explicit-units", text, "refuse it", raw)
        suffix = _EXPLICIT.get(unit, unit)
        return parse_size(f"{number}{suffix}", what)
    if unit in _DECIMAL and "." in number:
        # size-exact-decimals: vLLM truncates the float product; we compute it exactly and refuse a part byte.
        truncated = int(float(number) * _DECIMAL[unit])
        if raw != {"value": truncated}:
            raise _stale("size-exact-decimals", text, f"give the truncated float product {truncated}", raw)
        plain = _shift(number, _DECIMAL[unit])
        if not plain:
            raise ValueError(f"{what}: {text!r} is not a whole number of bytes (declared)")
        if int(plain) == truncated:
            raise AssertionError(f"size_as_declared: {text!r} is read alike by the float product; not a deviation case")
        return parse_size(plain, what)
    raise AssertionError(f"size_as_declared: {text!r} is not a text of a declared size-parser deviation")


# ------------------------------------------------------------------------------------------------ KV quant modes


def quant_modes() -> dict[str, int]:
    """``KVQuantMode.__members__`` name -> value, aliases included (``CUSTOM`` is ``OCTAVE_K3V4``, 12)."""
    from upstream import kv_quant

    return kv_quant.quant_modes()


def quant_mode_of(cache_dtype: str) -> dict[str, Any]:
    """``get_kv_quant_mode(cache_dtype)`` as ``{name, value}``; its ``KeyError`` for an unknown ``turboquant_*`` or
    ``octave_*`` name propagates."""
    from vllm.v1.kv_cache_interface import get_kv_quant_mode

    mode = get_kv_quant_mode(cache_dtype)
    return {"name": mode.name, "value": int(mode)}


def cache_dtypes() -> list[str]:
    """``KV_CACHE_DTYPES`` (vllm/config/cache.py), for the cases' notes and the strategy's check."""
    from upstream import kv_quant

    return kv_quant.cache_dtypes()


# ------------------------------------------------------------------------------------------------ estimate-max-model-len


def estimate_max_model_len(num_layers: int, block_size: int, num_kv_heads: int, head_size: int, dtype: str,
                           available_memory: int, max_model_len: int) -> int:
    """``upstream.kv_fit.estimate_max_model_len`` on the row's fit shape (vLLM's binary search over a real
    VllmConfig; it does not hold back the null block)."""
    from upstream import kv_fit

    return kv_fit.estimate_max_model_len(num_layers, block_size, num_kv_heads, head_size, dtype, available_memory,
                                         max_model_len)
