"""vLLM's command-line size parser as plain data (ROAD-V1-MEM M1, parse-size).

``human_readable_int`` lives in vllm/utils/argparse_utils.py in 0.33.0; ``--kv-cache-memory-bytes`` and the other
size flags are parsed with it. It strips the text, reads ``<digits>[.<digits>]<k|m|g|t>`` (decimal, float product
truncated) or ``<digits><K|M|G|T>`` (binary, a fraction refused with ``argparse.ArgumentTypeError``), and anything
else with ``int(value)`` (so signs, underscores and Unicode digits are Python's ``int`` rules).
"""
from __future__ import annotations

import argparse

import upstream  # noqa: F401  (environment before vLLM's import)

from vllm.utils.argparse_utils import human_readable_int, human_readable_int_or_auto


def parse(text: str) -> int:
    """``human_readable_int(text)`` (vllm/utils/argparse_utils.py); its exceptions propagate as they are
    (``ValueError`` from ``int()``, ``argparse.ArgumentTypeError`` for a binary fraction)."""
    return int(human_readable_int(text))


def parse_or_auto(text: str) -> int:
    """``human_readable_int_or_auto(text)`` (vllm/utils/argparse_utils.py): -1 for '-1' / 'auto'."""
    return int(human_readable_int_or_auto(text))


def outcome(text: str) -> dict[str, object]:
    """``human_readable_int(text)`` (vllm/utils/argparse_utils.py) as data: ``{value: int}`` or ``{error: class
    name, message: text}``; what an argparse ``type=`` sees (an ArgumentTypeError or ValueError is a refusal)."""
    try:
        return {"value": int(human_readable_int(text))}
    except (ValueError, argparse.ArgumentTypeError, TypeError) as exc:
        return {"error": type(exc).__name__, "message": str(exc)}
