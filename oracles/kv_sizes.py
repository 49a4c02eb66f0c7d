"""Oracle for reading byte sizes (MEM-1.9, MEM-1.10): the grammar enumerated, not parsed.

Different derivation: unit spellings generated from powers (10^3n, 2^10n), the text cut from the right into
every (number, unit) reading and accepted only if exactly one is well formed; exact ``Fraction`` arithmetic.
"""
from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

ASCII_DIGITS = frozenset("0123456789")  # not str.isdigit: that takes "٤", "４" and "²" as digits
SEPARATOR = " "  # only U+0020 may stand between the number and its unit, any number of times


class Unit(NamedTuple):
    base: int
    exponent: int

    @property
    def scale(self) -> int:
        return self.base ** self.exponent

    @property
    def takes_fraction(self) -> bool:
        """Only a decimal multiplier may carry a fraction: binary units and plain bytes take whole numbers."""
        return self.base == 10 and self.exponent > 0


# The ladder of prefixes; step n (1 = kilo .. 4 = tera) is the power base ** (width * n).
LADDER = ("kilo", "mega", "giga", "tera")
# How each family spells step n: (the prefix letter's case, what follows it, base, width).
FORMS = (
    (str.lower, "", 10, 3),    # vLLM's human_readable_int, lowercase: k m g t
    (str.upper, "", 2, 10),    # vLLM's human_readable_int, uppercase: K M G T
    (str.upper, "B", 10, 3),   # SI: KB MB GB TB
    (str.upper, "iB", 2, 10),  # IEC: KiB MiB GiB TiB
)


def _spellings() -> dict[str, Unit]:
    table: dict[str, Unit] = {"": Unit(1, 0)}  # no unit: plain bytes
    for step, name in enumerate(LADDER, start=1):
        for case, tail, base, width in FORMS:
            spelling = case(name[0]) + tail
            assert spelling not in table, f"two units spelled {spelling!r}"
            table[spelling] = Unit(base, width * step)
    return table


SPELLINGS = _spellings()
LONGEST = max(map(len, SPELLINGS))


def _trimmed(text: str) -> str:
    """``text`` without the whitespace (in Unicode's sense) at either end."""
    start, end = 0, len(text)
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return text[start:end]


def _numeral(head: str) -> tuple[str, str | None] | None:
    """``(whole digits, fraction digits or None)`` when ``head`` is DIGITS or DIGITS.DIGITS, else None."""
    whole, dot, fraction = head.partition(".")
    if not whole or not set(whole) <= ASCII_DIGITS:
        return None
    if not dot:
        return whole, None
    if not fraction or not set(fraction) <= ASCII_DIGITS:
        return None
    return whole, fraction


def _cuts(body: str) -> list[tuple[str, str | None, str]]:
    """Every reading of ``body`` as numeral + separator + unit spelling, the unit taken from the right."""
    readings = []
    for length in range(min(LONGEST, len(body)) + 1):
        head, spelling = body[:len(body) - length], body[len(body) - length:]
        if spelling not in SPELLINGS:
            continue
        numeral_part = head.rstrip(SEPARATOR) if spelling else head  # plain bytes: nothing after the digits
        number = _numeral(numeral_part)
        if number is not None:
            readings.append((number[0], number[1], spelling))
    return readings


def read_size(text: str, *, what: str) -> int:
    """Bytes denoted by ``text``; any text outside the grammar is a ValueError quoting it."""
    if not isinstance(text, str):
        raise TypeError(f"{what}: a size is text, not {type(text).__name__}: {text!r}")
    readings = _cuts(_trimmed(text))
    if not readings:
        raise ValueError(f"{what}: cannot read {text!r}: no cut is a number followed by a known unit")
    if len(readings) > 1:
        raise ValueError(f"{what}: {text!r} reads {len(readings)} ways: {readings!r}")
    whole, fraction, spelling = readings[0]
    unit = SPELLINGS[spelling]
    if fraction is not None and not unit.takes_fraction:
        raise ValueError(f"{what}: {text!r}: a fraction is not allowed with {spelling or 'plain bytes'!r}")
    # int() of each digit run on its own (no underscores or signs can reach it: the runs are ASCII digits)
    amount = Fraction(int(whole))
    if fraction is not None:
        amount += Fraction(int(fraction), 10 ** len(fraction))
    size = amount * unit.scale
    if size.denominator != 1:
        raise ValueError(f"{what}: {text!r} is not a whole number of bytes")
    return size.numerator
