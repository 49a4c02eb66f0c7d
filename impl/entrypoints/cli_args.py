"""Command-line KV sizing flags shared by ``kv-plan`` and the example CLI (MEM-1.1, MEM-1.9; issue 14).

Mirrors the flags of vllm/engine/arg_utils.py (``--kv-cache-memory-bytes`` is accepted as an alias).
One number syntax for every numeric flag: ASCII digits, an optional leading ``-`` and, for a fraction,
one ``.`` (``0.9``, ``.5``); no ``+``, underscore, exponent, space or other script's digits. A flag whose
value reaches the C ABI is bounded here by its ``vllm_model_params`` member's C type (int32_t, int64_t);
the other ranges are checked once, by ``EngineParams``, and :func:`checked_engine_params` words a
refusal after the flag rather than the field.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import fields
from typing import Callable, Mapping, TypeVar

from impl.entrypoints.config_file import shown
from impl.entrypoints.model_loader import C_INT_MEMBERS, INT32_MAX, EngineParams
from impl.entrypoints.sizes import parse_size

_KV_MEMORY_FLAG = "--kv-cache-memory"
_KV_MEMORY_ALIAS = "--kv-cache-memory-bytes"
_INTEGER = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)")
_MAX_SIZE_TEXT = 64
T = TypeVar("T")

FLAG_OF_FIELD: Mapping[str, str] = {
    "block_size": "--block-size", "num_blocks": "--num-blocks", "kv_cache_memory_bytes": _KV_MEMORY_FLAG,
    "gpu_memory_utilization": "--gpu-memory-utilization", "max_model_len": "--max-model-len",
    "max_num_batched_tokens": "--max-num-batched-tokens",
}
"""The flag that sets each ``EngineParams`` field, for messages in the user's words."""


class FlagError(ValueError):
    """A flag value refused after parsing; the message starts with the flag as the user types it."""


def bounded_int_arg(maximum: int, what: str) -> Callable[[str], int]:
    """An integer flag of at most ``maximum`` in absolute value (``what`` says why), in the one number syntax."""
    def parse(text: str) -> int:
        if not _INTEGER.fullmatch(text):
            raise argparse.ArgumentTypeError(
                f"expected an integer, got {shown(text)} (accepted: ASCII digits, an optional leading '-')")
        if len(text.lstrip("-").lstrip("0")) > len(str(maximum)) or abs(int(text)) > maximum:
            raise argparse.ArgumentTypeError(f"{shown(text)} is out of range: at most {maximum} ({what})")
        return int(text)
    parse.__name__ = "integer"
    return parse


def member_int_arg(member: str) -> Callable[[str], int]:
    """An integer flag bounded by the C type of the ``vllm_model_params`` member it fills."""
    ctype, _, maximum = C_INT_MEMBERS[member]
    return bounded_int_arg(maximum, f"vllm_model_params.{member} is an {ctype}")


int_arg = bounded_int_arg(INT32_MAX, "a count kv-plan takes is at most a 32-bit int")
"""An integer flag that does not reach the C ABI (e.g. ``--tensor-parallel-size``)."""


def decimal_arg(text: str) -> float:
    """A fraction flag: ``0.9``, ``1``, ``.5`` in the one number syntax; its range is checked by ``EngineParams``."""
    if not _DECIMAL.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected a number such as 0.9, got {shown(text)} "
                                         "(accepted: ASCII digits, an optional leading '-', one '.')")
    return float(text)


def size_arg(flag: str) -> Callable[[str], int]:
    """A byte-size flag (impl/entrypoints/sizes.py) that fits the int64_t kv_cache_memory_bytes."""
    _, _, maximum = C_INT_MEMBERS["kv_cache_memory_bytes"]
    too_big = f"at most {maximum} bytes (8 EiB): vllm_model_params.kv_cache_memory_bytes is an int64_t"

    def parse(text: str) -> int:
        if len(text) > _MAX_SIZE_TEXT:
            raise argparse.ArgumentTypeError(f"{shown(text)} is too long for a size; accepted: {too_big}")
        try:
            size = parse_size(text, what=flag)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err).removeprefix(f"{flag}: ")) from None
        if size > maximum:
            raise argparse.ArgumentTypeError(f"{shown(text)} is {size:.3g} bytes, out of range: {too_big}")
        return size
    parse.__name__ = "size"
    return parse


def add_sizing_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add --block-size, --num-blocks, --kv-cache-memory (alias --kv-cache-memory-bytes), --gpu-memory-utilization
    and --max-model-len."""
    group = parser.add_argument_group("KV-cache sizing (precedence: --num-blocks > --kv-cache-memory > "
                                      "--gpu-memory-utilization)")
    group.add_argument("--block-size", type=member_int_arg("block_size"), default=32, metavar="N",
                       help="tokens per KV block (default: 32)")
    group.add_argument("--num-blocks", type=member_int_arg("num_blocks"), default=0, metavar="N",
                       help="use exactly N KV blocks; 0 sizes the pool from memory (default: 0)")
    group.add_argument(_KV_MEMORY_FLAG, dest="kv_cache_memory_bytes", type=size_arg(_KV_MEMORY_FLAG),
                       default=0, metavar="SIZE",
                       help="KV pool budget: bytes, 25.6k / 4G (vLLM suffixes), 4GB / 4GiB; 0 = unset. "
                            "Ignores --gpu-memory-utilization")
    group.add_argument(_KV_MEMORY_ALIAS, dest="kv_cache_memory_bytes", type=size_arg(_KV_MEMORY_ALIAS),
                       default=argparse.SUPPRESS, metavar="SIZE", help=f"the same as {_KV_MEMORY_FLAG} (vLLM's name)")
    group.add_argument("--gpu-memory-utilization", type=decimal_arg, default=None, metavar="F",
                       help="fraction of device memory for the engine, in (0, 1] (default: 0.92)")
    group.add_argument("--max-model-len", type=member_int_arg("max_model_len"), default=0, metavar="L",
                       help="longest request in tokens; 0 = the model's own limit")
    return parser


_PARAM_FIELDS = frozenset(f.name for f in fields(EngineParams))


def _param_values(namespace: argparse.Namespace) -> dict[str, object]:
    """The flags that are ``EngineParams`` fields; an unset utilization is left out (it stays the default)."""
    values = {name: value for name, value in vars(namespace).items() if name in _PARAM_FIELDS}
    if values.get("gpu_memory_utilization") is None:
        values.pop("gpu_memory_utilization", None)
    return values


def engine_params_from_args(namespace: argparse.Namespace) -> EngineParams:
    """Build validated ``EngineParams`` from parsed flags; an unset utilization stays the default."""
    return EngineParams(**_param_values(namespace))


def reworded(flag: str, prefix: str, make: Callable[[], T]) -> T:
    """``make()``; a refusal worded ``{prefix} must be ...`` (a field's name) is raised as ``{flag} must be ...``."""
    try:
        return make()
    except (TypeError, ValueError) as err:
        reason = str(err)
        reason = reason[len(prefix):].lstrip(" =") if reason.startswith(prefix) else reason
        raise FlagError(f"{flag} {reason}") from None


def checked_engine_params(namespace: argparse.Namespace) -> EngineParams:
    """:func:`engine_params_from_args` for a command line: each flag is checked alone first, so that a
    refusal names the flag (``--gpu-memory-utilization must be ...``), not ``EngineParams.gpu_memory_utilization``."""
    values = _param_values(namespace)
    for name, value in values.items():
        if name in FLAG_OF_FIELD:
            reworded(FLAG_OF_FIELD[name], f"EngineParams.{name}", lambda: EngineParams(**{name: value}))
    return EngineParams(**values)


EXIT_INTERRUPTED = 130


def _quiet_stdout() -> None:
    """After the reader closed the pipe, point stdout at /dev/null so that the exit-time flush stays silent."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (a test's capture)
        pass


def run_console(prog: str, run: Callable[[], int]) -> int:
    """``run()`` as a console script (issue 14): a reader that closes the pipe (``| head -3``) ends it quietly
    with 0; Ctrl-C is the one line ``PROG: interrupted`` and exit status 130, never a traceback."""
    try:
        return run()
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return 0
