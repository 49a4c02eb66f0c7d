"""Byte sizes given on the command line, e.g. ``--kv-cache-memory 4GiB`` (MEM-1.9, MEM-1.10).

Mirrors vLLM's ``human_readable_int`` (vllm/utils/argparse_utils.py) and adds explicit SI/IEC units.
Rules, in full:

- plain bytes: ASCII digits only (``"4294967296"``); no sign, exponent, underscore or fraction;
- vLLM's one-letter suffixes: lowercase ``k m g t`` are decimal (10^3 .. 10^12) and may carry a
  fraction (``"25.6k"`` = 25600); uppercase ``K M G T`` are binary (2^10 .. 2^40) and may not;
- explicit units: ``KB MB GB TB`` decimal (fraction allowed), ``KiB MiB GiB TiB`` binary (no fraction);
- surrounding whitespace is ignored and one or more spaces may separate number and unit
  (``"4 GB"`` = 4 * 10^9, ``"4 GiB"`` = 4 * 2^30);
- a fraction must come to a whole number of bytes (``"1.0005k"`` is refused, never truncated);
- anything else (``"4gb"``, ``"4GIB"``, ``"4 B"``, ``"-1"``, ``"1e9"``, ``""``) is an error quoting the text.
"""
from __future__ import annotations

import re
from fractions import Fraction

DECIMAL_UNITS = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
                 "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
BINARY_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40,
                "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}

_SIZE = re.compile(r"(?P<whole>[0-9]+)(?:\.(?P<frac>[0-9]+))?(?: +(?=[A-Za-z]))?(?P<unit>[A-Za-z]*)")
_HINT = "plain bytes, k/m/g/t (decimal), K/M/G/T (binary), KB/MB/GB/TB or KiB/MiB/GiB/TiB"


def parse_size(text: str, *, what: str) -> int:
    """Bytes denoted by ``text``; ``what`` names the option in error messages."""
    if not isinstance(text, str):
        raise TypeError(f"{what}: a size must be given as text, got {text!r} ({type(text).__name__})")
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{what}: cannot read {text!r} as a size; use {_HINT}")
    whole, frac, unit = match["whole"], match["frac"], match["unit"]
    if unit in BINARY_UNITS:
        if frac is not None:
            raise ValueError(
                f"{what}: {text!r} has a fraction with the binary unit {unit!r}, which is not allowed; "
                f"write a whole number of {unit}, or use a decimal unit ({unit[0].lower()} or {unit[0].upper()}B)"
            )
        return int(whole) * BINARY_UNITS[unit]
    if unit in DECIMAL_UNITS:
        value = Fraction(f"{whole}.{frac or '0'}") * DECIMAL_UNITS[unit]
        if value.denominator != 1:
            bytes_, part = divmod(value, 1)  # exact: a float of a huge size would overflow (MEM-1.10 is a ValueError)
            raise ValueError(f"{what}: {text!r} is not a whole number of bytes ({bytes_} and {part} bytes)")
        return int(value)
    if unit:
        raise ValueError(f"{what}: cannot read {text!r} as a size: unknown unit {unit!r}; use {_HINT}")
    if frac is not None:
        raise ValueError(f"{what}: {text!r} is not a whole number of bytes; use {_HINT}")
    return int(whole)
