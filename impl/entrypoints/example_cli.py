"""The example CLI: sizing flags -> ``vllm_model_params`` -> ``EngineParams``, as a C caller does (CAPI-10.1, CAPI-10.2).

Mirrors examples/cli of the C++ port; the flags are parsed by the code of ``kv-plan``
(impl/entrypoints/cli_args.py), so both front doors read ``--kv-cache-memory 4GiB`` alike.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn, Sequence

from impl.capi import ModelParams, engine_params_from_c, model_params_default
from impl.capi.abi import MEMBERS
from impl.capi.convert import member_to_c
from impl.entrypoints.cli_args import add_sizing_arguments, engine_params_from_args, run_console
from impl.entrypoints.model_loader import EngineParams


class CliUsageError(ValueError):
    """A command line the example CLI cannot parse (unknown flag, unreadable value)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CliUsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    """``--model`` plus the shared sizing flags; usage errors raise CliUsageError instead of exiting."""
    parser = _Parser(prog="example-cli", description="Fill vllm_model_params from flags and show what the "
                                                     "engine reads from it.")
    parser.add_argument("--model", dest="model_path", metavar="PATH", default=None,
                        help="model directory or file (vllm_model_params.model_path)")
    add_sizing_arguments(parser)
    return parser


def model_params_from_args(args: argparse.Namespace) -> ModelParams:
    """The struct a C caller fills from these flags: the default struct, then each flag's member.

    A value the Python path refuses is refused here first (CAPI-10.2): written into the struct, a
    ``--gpu-memory-utilization 0`` or ``--block-size 0`` would silently read as the default.
    """
    engine_params_from_args(args)
    params = model_params_default()
    params.model_path = member_to_c("model_path", args.model_path)
    for name in ("block_size", "num_blocks", "max_model_len", "kv_cache_memory_bytes"):
        setattr(params, name, member_to_c(name, getattr(args, name)))
    chosen = args.gpu_memory_utilization
    params.gpu_memory_utilization = 0.0 if chosen is None else member_to_c("gpu_memory_utilization", chosen)
    return params


def engine_params_via_c(argv: Sequence[str]) -> EngineParams:
    """Parse ``argv``, fill ``vllm_model_params`` and read it back with ``engine_params_from_c``."""
    return engine_params_from_c(model_params_from_args(build_parser().parse_args(list(argv))))


def _report(params: ModelParams, engine: EngineParams) -> dict[str, Any]:
    members = {name: getattr(params, name) for name, _, _ in MEMBERS}
    shown = {name: value.decode("utf-8") if isinstance(value, bytes) else value for name, value in members.items()}
    return {"vllm_model_params": shown,
            "engine_params": {name: getattr(engine, name) for name, _, _ in MEMBERS},
            "gpu_memory_utilization_is_explicit": engine.gpu_memory_utilization_is_explicit}


def _run(argv: Sequence[str] | None) -> int:
    """Print, as JSON, the struct the flags fill and the EngineParams the engine reads; 2 on a bad flag."""
    try:
        params = model_params_from_args(build_parser().parse_args(sys.argv[1:] if argv is None else list(argv)))
        engine = engine_params_from_c(params)
    except (ValueError, TypeError) as err:  # a usage error's message already starts with the program's name
        print(f"example-cli: error: {str(err).removeprefix('example-cli: ')}", file=sys.stderr)
        return 2
    print(json.dumps(_report(params, engine), indent=2))
    sys.stdout.flush()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """:func:`_run` as a console script: quiet on a closed pipe, one line on Ctrl-C (issue 14)."""
    return run_console("example-cli", lambda: _run(argv))


if __name__ == "__main__":
    sys.exit(main())
