"""Oracle for reading byte sizes (MEM-1.9, MEM-1.10): a character scan and exact decimal arithmetic.

Mirrors the rules of vllm/utils/argparse_utils.py (``human_readable_int``) plus explicit SI/IEC units.
"""
from __future__ import annotations

from decimal import Decimal, localcontext

DIGITS = "0123456789"
# unit -> (bytes per unit, may the number carry a fraction)
UNITS = {"": (1, False)}
for _power, _letter in enumerate("kmgt", start=1):
    UNITS[_letter] = (1000**_power, True)
    UNITS[_letter.upper() + "B"] = (1000**_power, True)
    UNITS[_letter.upper()] = (1024**_power, False)
    UNITS[_letter.upper() + "iB"] = (1024**_power, False)


def read_size(text: str, *, what: str) -> int:
    """Bytes denoted by ``text``; any text outside the rules is a ValueError."""
    if not isinstance(text, str):
        raise TypeError(f"{what}: not text: {text!r}")
    body = text.strip()
    cut = 0
    while cut < len(body) and (body[cut] in DIGITS or body[cut] == "."):
        cut += 1
    number, unit = body[:cut], body[cut:]
    if unit.startswith(" "):
        unit = unit.lstrip(" ")
        if not unit:
            raise ValueError(f"{what}: {text!r}: spaces but no unit")
    parts = number.split(".")
    if len(parts) > 2 or not all(part and all(c in DIGITS for c in part) for part in parts):
        raise ValueError(f"{what}: {text!r} does not start with a number")
    if unit not in UNITS:
        raise ValueError(f"{what}: {text!r} has an unknown unit {unit!r}")
    scale, fraction_ok = UNITS[unit]
    if len(parts) == 2 and not fraction_ok:
        raise ValueError(f"{what}: {text!r}: no fraction allowed with {unit or 'plain bytes'}")
    with localcontext() as ctx:
        ctx.prec = 80
        value = Decimal(number) * scale
    if value != value.to_integral_value():
        raise ValueError(f"{what}: {text!r} is not a whole number of bytes")
    return int(value)
