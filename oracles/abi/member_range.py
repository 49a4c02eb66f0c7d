"""What an integer member of vllm_model_params holds: every value its compiled width and signedness allow, nothing
else (CAPI-5.9: a value a C field cannot hold is refused, never wrapped).

The width is the compiler's (oracles.abi.layout measures it); the range is derived from it, not from a table.
"""
from __future__ import annotations

from pathlib import Path

from oracles.abi.layout import measure

_SIGNED = ("int8_t", "int16_t", "int32_t", "int64_t")


def member_write(header: str | Path, member: str, value: int) -> int:
    """``value`` when the member's C type holds it; OverflowError naming the type and the range otherwise."""
    fields = {f.name: f for f in measure(Path(header).read_text(encoding="utf-8")).fields}
    if member not in fields or fields[member].ctype not in _SIGNED:
        raise ValueError(f"vllm_model_params has no int32_t or int64_t member {member!r}")
    field = fields[member]
    bits = 8 * field.size
    least, greatest = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if type(value) is not int:
        raise TypeError(f"vllm_model_params.{member} takes an int, got {value!r}")
    if not least <= value <= greatest:
        raise OverflowError(f"vllm_model_params.{member} is an {field.ctype}: {value} does not fit "
                            f"(accepted: {least}..{greatest})")
    return value
