"""Command-line KV sizing flags shared by ``kv-plan`` and the example CLI (MEM-1.1, MEM-1.9).

Mirrors the flags of vllm/engine/arg_utils.py (``--kv-cache-memory-bytes`` is accepted as an alias).
Flag values are only parsed here; ranges are checked once, by ``EngineParams``.
"""
from __future__ import annotations

import argparse
from dataclasses import fields

from impl.entrypoints.model_loader import EngineParams
from impl.entrypoints.sizes import parse_size

_KV_MEMORY_FLAG = "--kv-cache-memory"


def int_arg(text: str) -> int:
    """An integer flag: ASCII digits with an optional leading minus sign, nothing else."""
    body = text[1:] if text.startswith("-") else text
    if not body.isascii() or not body.isdigit():
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    return int(text)


def _float_arg(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _size_arg(text: str) -> int:
    try:
        return parse_size(text, what=_KV_MEMORY_FLAG)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_sizing_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add --block-size, --num-blocks, --kv-cache-memory, --gpu-memory-utilization, --max-model-len."""
    group = parser.add_argument_group("KV-cache sizing (precedence: --num-blocks > --kv-cache-memory > "
                                      "--gpu-memory-utilization)")
    group.add_argument("--block-size", type=int_arg, default=32, metavar="N",
                       help="tokens per KV block (default: 32)")
    group.add_argument("--num-blocks", type=int_arg, default=0, metavar="N",
                       help="use exactly N KV blocks; 0 sizes the pool from memory (default: 0)")
    group.add_argument(_KV_MEMORY_FLAG, "--kv-cache-memory-bytes", dest="kv_cache_memory_bytes", type=_size_arg,
                       default=0, metavar="SIZE",
                       help="KV pool budget: bytes, 25.6k / 4G (vLLM suffixes), 4GB / 4GiB; 0 = unset. "
                            "Ignores --gpu-memory-utilization")
    group.add_argument("--gpu-memory-utilization", type=_float_arg, default=None, metavar="F",
                       help="fraction of device memory for the engine, in (0, 1] (default: 0.92)")
    group.add_argument("--max-model-len", type=int_arg, default=0, metavar="L",
                       help="longest request in tokens; 0 = the model's own limit")
    return parser


_PARAM_FIELDS = frozenset(f.name for f in fields(EngineParams))


def engine_params_from_args(namespace: argparse.Namespace) -> EngineParams:
    """Build validated ``EngineParams`` from parsed flags; an unset utilization stays the default."""
    values = {name: value for name, value in vars(namespace).items() if name in _PARAM_FIELDS}
    if values.get("gpu_memory_utilization") is None:
        values.pop("gpu_memory_utilization", None)
    return EngineParams(**values)
