"""Adapters that give the ROAD-V1-MEM gates a plain-data view of impl behaviour (values, warnings, CLI).

Each adapter is the gate's ``impl`` target; its known-bad stand-ins in ``gates/known_bad/kv_*.py`` take
the same parameters.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

from impl.entrypoints.cli_args import add_sizing_arguments, engine_params_from_args
from impl.entrypoints.model_loader import EngineParams, UtilizationNotAppliedWarning, resolve_num_blocks
from impl.v1.kv_cache_interface import kv_bytes_per_block as impl_kv_bytes_per_block

from .build import impl_kv_config, impl_spec

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "models"
FIXTURES_FROM_ROOT = "gates/rows/road_v1_mem/fixtures/models"


def page_size_bytes(spec: Mapping[str, Any]) -> int:
    """Construct the spec (so construction errors are the impl's outcome) and read its page size."""
    return impl_spec(spec).page_size_bytes


def kv_bytes_per_block(layout: Mapping[str, Any]) -> int:
    """Construct the KV config of a layout (its groups' construction errors are the impl's outcome) and read its
    bytes per block."""
    return impl_kv_bytes_per_block(impl_kv_config(layout))


def max_memory_usage_bytes(spec: Mapping[str, Any], max_model_len: int, max_num_batched_tokens: int | None = None
                           ) -> int:
    """Construct the spec and read the most bytes one request of ``max_model_len`` tokens holds in it (MEM-2.9)."""
    return impl_spec(spec).max_memory_usage_bytes(max_model_len, max_num_batched_tokens)


def params_view(params: EngineParams) -> dict[str, Any]:
    """The sizing fields of ``EngineParams`` and whether the utilization was chosen."""
    return {"block_size": params.block_size, "num_blocks": params.num_blocks,
            "kv_cache_memory_bytes": params.kv_cache_memory_bytes, "max_model_len": params.max_model_len,
            "gpu_memory_utilization": float(params.gpu_memory_utilization),
            "utilization_explicit": params.gpu_memory_utilization_is_explicit}


def engine_params_view(params: EngineParams) -> dict[str, Any]:
    """:func:`params_view` plus the other integer members, whose C++ defaults MEM-1.1 fixes."""
    return {**params_view(params), "max_num_seqs": params.max_num_seqs,
            "max_num_batched_tokens": params.max_num_batched_tokens,
            "enable_prefix_caching": params.enable_prefix_caching,
            "enable_jump_forward": params.enable_jump_forward, "device": params.device}


def engine_params(**fields: Any) -> dict[str, Any]:
    """``EngineParams(**fields)`` seen through :func:`engine_params_view`."""
    return engine_params_view(EngineParams(**fields))


def params_from_argv(argv: list[str]) -> dict[str, Any]:
    """Parse the shared sizing flags; an argparse refusal becomes a ValueError carrying its message."""
    parser = add_sizing_arguments(argparse.ArgumentParser(prog="gate"))
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            namespace = parser.parse_args(argv)
    except SystemExit:
        raise ValueError(stderr.getvalue().strip()) from None
    return params_view(engine_params_from_args(namespace))


def blocks_and_warning(params: EngineParams, probe: Any, profile: Any = None) -> dict[str, Any]:
    """The block count and whether ``UtilizationNotAppliedWarning`` was raised while resolving it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        blocks = resolve_num_blocks(params, probe, profile)
    warned = any(issubclass(w.category, UtilizationNotAppliedWarning) for w in caught)
    return {"num_blocks": blocks, "warned": warned}


def model_config(model: str | Mapping[str, Any]) -> dict[str, Any]:
    """A shipped fixture by stem (``llama-3.1-8b``) or an inline config mapping."""
    from impl.entrypoints.model_geometry import load_model_config

    if isinstance(model, str):
        return load_model_config(FIXTURES / f"{model}.json")
    return dict(model)


def model_probe(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                kv_cache_dtype: str = "auto") -> Any:
    """The impl's probe (KV layout) of one rank of a model."""
    from impl.entrypoints.model_geometry import ProbeRequest, probe_kv_cache_config

    request = ProbeRequest(tensor_parallel_size=tensor_parallel_size, block_size=block_size,
                           kv_cache_dtype=kv_cache_dtype)
    return probe_kv_cache_config(model_config(model), request)


def model_bytes_per_block(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                          kv_cache_dtype: str = "auto") -> int:
    """Bytes per KV block of one rank of a model, through the impl's probe."""
    return impl_kv_bytes_per_block(model_probe(model, tensor_parallel_size, block_size, kv_cache_dtype))


def model_kv_layers(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                    kv_cache_dtype: str = "auto") -> dict[str, str]:
    """Each KV layer of one rank of a model, by name, with its spec's class (MEM-2.11: the layer types)."""
    probe = model_probe(model, tensor_parallel_size, block_size, kv_cache_dtype)
    return {name: type(group.kv_cache_spec).__name__ for group in probe.kv_cache_groups for name in group.layer_names}


def kv_plan_summary(model: str | None = None, argv: Sequence[str] = (), config: Mapping[str, Any] | None = None
                    ) -> dict[str, Any]:
    """What ``kv-plan --model-config <fixture> ARGV --json`` reports, less the free text; ``config`` (instead of a
    fixture stem) is written to a config.json of its own for kv-plan to read."""
    from impl.entrypoints import kv_plan

    if (model is None) == (config is None):
        raise ValueError(f"kv-plan-summary needs one of model and config, got model={model!r}, config={config!r}")
    parser = kv_plan.build_parser()
    with tempfile.TemporaryDirectory(prefix="gates-kv-plan-") as folder:
        path = FIXTURES / f"{model}.json"
        if config is not None:
            path = Path(folder) / "config.json"
            path.write_text(json.dumps(config), encoding="utf-8")
        result = kv_plan.plan(parser.parse_args(["--model-config", str(path), *argv]))
    concurrency = result["max_concurrency"]
    return {"bytes_per_block": result["bytes_per_block"], "num_blocks": result["num_blocks"],
            "decided_by": result["decided_by"], "kv_cache_tokens": result["kv_cache_tokens"],
            "group_bytes_per_block": [g["bytes_per_block"] for g in result["groups"]],
            "group_state_bytes": [g["state_bytes_per_sequence"] for g in result["groups"]],
            "max_concurrency": None if concurrency is None else round(concurrency, 4),
            "warned": bool(result["warnings"]), "vllm": _vllm_pool_summary(result["vllm_pool"])}


def kv_plan_cli(model: str, argv: list[str]) -> dict[str, Any]:
    """``kv-plan --model-config <fixture> ARGV`` run as a command: its exit status and what it writes (MEM-2.12).

    The fixture is named by its path under the project root, as the C++ port's operation names it, and the command
    runs there, as a user runs it (the worker itself starts in a scratch folder: docs/worker-protocol.md §2.2).
    A flag the parser refuses (argparse exits) becomes a ValueError carrying argparse's message."""
    from impl.entrypoints import kv_plan

    stdout, stderr = io.StringIO(), io.StringIO()
    before = os.getcwd()
    os.chdir(FIXTURES.parents[4])
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            status = kv_plan.main(["--model-config", f"{FIXTURES_FROM_ROOT}/{model}.json", *argv])
    except SystemExit:
        raise ValueError(stderr.getvalue().strip()) from None
    finally:
        os.chdir(before)
    return {"exit": status, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()}


def _vllm_pool_summary(pool: Mapping[str, Any]) -> dict[str, Any]:
    """kv-plan's vLLM section less its free text and per-group lines (MEM-2.12)."""
    concurrency = pool["max_concurrency"]
    return {"computed": pool["computed"], "decided_by": pool["decided_by"], "bytes_per_block": pool["bytes_per_block"],
            "num_blocks": pool["num_blocks"], "kv_cache_tokens": pool["kv_cache_tokens"],
            "max_concurrency": None if concurrency is None else round(concurrency, 4),
            "agrees_with_port": pool["agrees_with_port"]}
