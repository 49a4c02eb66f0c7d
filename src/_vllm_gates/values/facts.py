"""The facts an error message must carry for an implementation in another language (issue: gate the C++ port):
its numbers and its flag and field names, taken from a case's `raises.match` pattern unless `raises.facts` lists
them. Wording is one language's; the numbers and names are the error's content."""
from __future__ import annotations

import re

_FACT = re.compile(r"--[a-z0-9][a-z0-9-]*|\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b|(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")
_QUANTIFIER = re.compile(r"\{\d*,?\d*\}")


def literal_text(pattern: str) -> str:
    """The literal parts of a regular expression, with its operators as spaces: `\\(0, 1\\]` -> `(0, 1]`, character
    classes and `\\d`-style escapes dropped; `.` kept, since patterns write decimals as `1.01`."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            following = pattern[i + 1]
            out.append(" " if following.isalnum() else following)
            i += 2
            continue
        if char == "[":
            close = pattern.find("]", i + 2)
            i = close + 1 if close > 0 else len(pattern)
            out.append(" ")
            continue
        if char == "{":
            quantifier = _QUANTIFIER.match(pattern, i)
            if quantifier:
                i = quantifier.end()
                out.append(" ")
                continue
        out.append(" " if char in "*+?^$|()" else char)
        i += 1
    return "".join(out)


def facts_in(text: str) -> tuple[str, ...]:
    """The numbers, `--flags` and snake_case names in a text, in order, without repeats."""
    return tuple(dict.fromkeys(match.rstrip(".") for match in _FACT.findall(text)))


def facts_of_pattern(pattern: str | None) -> tuple[str, ...]:
    return facts_in(literal_text(pattern)) if pattern else ()


def missing_facts(message: str, facts: tuple[str, ...]) -> list[str]:
    """The facts a message does not contain (as text)."""
    return [fact for fact in facts if fact not in message]
