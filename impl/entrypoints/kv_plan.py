"""``kv-plan``: how a model's KV pool would be sized, worded like vLLM's startup log (MEM-1.11, MEM-2.12).

Mirrors the "GPU KV cache size" / "Maximum concurrency" lines of vllm/v1/core/kv_cache_utils.py, and vLLM's
refusal of a ``--max-model-len`` above the model's (``_get_and_verify_max_len``, vllm/config/model.py).
Two allocation models (issue 13, item 4): the top-level figures are the C++ port's, a block summed over every
layer (what ROAD-V1-MEM gates); ``vllm_pool`` is vLLM 0.33.0's, one pool of block ids shared by the KV cache groups
and sized by the largest group (impl/v1/core/kv_pool_groups.py, which cites the vLLM files). For one group they
agree, and the text says so in one line.
As a user meets it (issue 14): no torch on its path (specs are built from ``PlainDType``), so it answers in
well under half a second; a bad flag or config is one line naming the flag, or the file and field, with
exit status 2; a reader that closes the pipe ends it quietly; Ctrl-C is one line, exit status 130.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Any, Mapping, Sequence

from impl.entrypoints.cli_args import (
    FlagError,
    add_sizing_arguments,
    checked_engine_params,
    int_arg,
    member_int_arg,
    reworded,
    run_console,
)
from impl.entrypoints.config_file import MAX_LENGTH_KEYS, ConfigError, check_config_fields
from impl.entrypoints.model_geometry import (
    KV_CACHE_DTYPES,
    MODEL_DTYPE_NAMES,
    ProbeRequest,
    auto_run_dtype_name,
    derived_max_model_len,
    load_model_config,
    probe_kv_cache_config,
)
from impl.entrypoints.model_loader import EngineParams, resolve_kv_pool
from impl.v1.core.kv_pool_groups import VLLM_VERSION, unmodelled_reason, vllm_pool
from impl.v1.dtypes import PLAIN_DTYPES, PlainDType
from impl.v1.kv_cache_interface import AttentionSpec, KVCacheConfig, SlidingWindowSpec, cdiv, kv_bytes_per_block

EXIT_USAGE = 2

_DECIDED_BY = {
    "num_blocks": "--num-blocks (override)",
    "kv_cache_memory_bytes": "--kv-cache-memory (budget // bytes per block)",
    "gpu_memory_utilization": "--gpu-memory-utilization (memory profile)",
    "fallback": "fallback: no memory profile yet (ROAD-V1-MEM M3), 256 blocks",
}

PORT_LABEL = "C++ port: summed over layers"
VLLM_LABEL = f"vLLM {VLLM_VERSION}: pool shared by KV cache groups"
_VLLM_DECIDED_BY = {
    "num_blocks": "--num-blocks (num_gpu_blocks_override)",
    "kv_cache_memory_bytes": "--kv-cache-memory (kv_cache_memory_bytes // bytes per block)",
    "port_pool_memory": "the C++ port's pool memory // bytes per block (no memory profile here)",
}
_COMPARED = ("bytes_per_block", "num_blocks", "kv_cache_tokens", "max_concurrency")


def build_parser() -> argparse.ArgumentParser:
    """kv-plan's flags: the model config, ranks, dtypes, --json and the shared sizing flags."""
    parser = argparse.ArgumentParser(prog="kv-plan", description="Plan the KV-cache pool of a model on one rank.")
    parser.add_argument("--model-config", required=True, metavar="PATH", help="the model's config.json")
    parser.add_argument("--tensor-parallel-size", type=int_arg, default=1, metavar="N", help="ranks (default: 1)")
    parser.add_argument("--dtype", default="auto", choices=("auto", *MODEL_DTYPE_NAMES),
                        help="model dtype (default: the config's torch_dtype)")
    parser.add_argument("--kv-cache-dtype", default="auto", choices=KV_CACHE_DTYPES, metavar="DTYPE",
                        help=f"KV storage: {', '.join(KV_CACHE_DTYPES)} (default: auto, the model dtype)")
    parser.add_argument("--max-num-batched-tokens", type=member_int_arg("max_num_batched_tokens"), default=0,
                        metavar="T", help="tokens per step, for sliding-window usage (default: max model length)")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    add_sizing_arguments(parser)
    return parser


def _model_dtype(flag: str, cfg: Mapping[str, Any], path: str) -> PlainDType:
    """The dtype the model runs in (MEM-2.11): an explicit ``--dtype`` as given (the geometry refuses float16 for
    Gemma-2/3 then, as vLLM does), or for ``auto`` vLLM's resolution of the config's ``torch_dtype`` (or
    ``dtype``): a float16 Gemma-2/3 checkpoint runs in bfloat16 (vllm/config/model.py). Refusals mention ``--dtype``."""
    if flag != "auto":
        return PLAIN_DTYPES[flag]
    key = "torch_dtype" if cfg.get("torch_dtype") is not None else "dtype"
    name, choices = cfg.get(key), "|".join(MODEL_DTYPE_NAMES)
    if name is None:
        raise ConfigError(f"{path} has no 'torch_dtype' (or 'dtype') field naming the model's dtype; "
                          f"give it with --dtype {choices}")
    if name not in MODEL_DTYPE_NAMES:
        raise ConfigError(f"{path}: {key!r} must be one of {list(MODEL_DTYPE_NAMES)}, got {name!r}; "
                          f"or give the model's dtype with --dtype {choices}")
    return PLAIN_DTYPES[auto_run_dtype_name(cfg, name)]


def _probe(cfg: Mapping[str, Any], request: ProbeRequest, path: str) -> KVCacheConfig:
    """The model's KV layout on one rank; a geometry the config cannot give is refused naming the file."""
    try:
        return probe_kv_cache_config(cfg, request)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{path}: {err}") from None


def _max_model_len(requested: int, cfg: Mapping[str, Any], path: str) -> int:
    """``--max-model-len``, or the model's own limit when 0; a length above the model's is refused, as vLLM does."""
    derived = derived_max_model_len(cfg)
    if derived is None:
        if requested:
            return requested
        raise ConfigError(f"{path} has none of {', '.join(MAX_LENGTH_KEYS)}, which give the model's longest "
                          "sequence; give --max-model-len")
    key, limit = derived
    if not requested:
        if int(limit) < 1:
            raise ConfigError(f"{path}: the model's longest sequence comes to {limit} tokens ({key}, rope_scaling); "
                              "give --max-model-len")
        return int(limit)
    model_max_length = cfg.get("model_max_length")
    if requested > limit and not (model_max_length is not None and requested <= model_max_length):
        raise FlagError(f"--max-model-len {requested} is greater than the derived max_model_len ({key}={limit} or "
                        f"model_max_length={model_max_length} in {path}), which vLLM refuses; give at most "
                        f"{int(limit)}, or 0 for the model's own length")
    return requested


def plan(args: argparse.Namespace) -> dict[str, Any]:
    """Resolve the pool for parsed flags; raises ValueError (FlagError, ConfigError) on a bad config or knob."""
    params = checked_engine_params(args)
    path = str(args.model_config)
    cfg = load_model_config(path)
    check_config_fields(cfg, path)
    reworded("--tensor-parallel-size", "ProbeRequest.tensor_parallel_size",
             lambda: ProbeRequest(tensor_parallel_size=args.tensor_parallel_size))
    request = ProbeRequest(tensor_parallel_size=args.tensor_parallel_size, dtype=_model_dtype(args.dtype, cfg, path),
                           kv_cache_dtype=args.kv_cache_dtype, block_size=params.block_size)
    probe = _probe(cfg, request, path)
    max_len = _max_model_len(params.max_model_len, cfg, path)
    batched = args.max_num_batched_tokens or None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sizing = resolve_kv_pool(params, probe)
    bpb = kv_bytes_per_block(probe)
    num_blocks = sizing.num_blocks  # resolve_kv_pool refuses a count an int32_t cannot hold, naming the flag
    groups, request_bytes = [], 0
    for index, group in enumerate(probe.kv_cache_groups):
        spec, layers = group.kv_cache_spec, len(group.layer_names)
        per_block = isinstance(spec, AttentionSpec)
        if per_block:
            request_bytes += layers * spec.max_memory_usage_bytes(max_len, batched)
        groups.append({"group": index, "spec": type(spec).__name__, "layers": layers,
                       "page_size_bytes": spec.page_size_bytes,
                       "bytes_per_block": spec.page_size_bytes * layers if per_block else 0,
                       "state_bytes_per_sequence": 0 if per_block else spec.page_size_bytes * layers})
    blocks_per_request = cdiv(request_bytes, bpb) if bpb else 0
    port = {"bytes_per_block": bpb, "num_blocks": num_blocks, "kv_cache_tokens": num_blocks * params.block_size,
            "max_concurrency": num_blocks / blocks_per_request if blocks_per_request else None}
    return {
        "model_config": path,
        "architecture": (cfg.get("architectures") or [cfg.get("model_type")])[0],
        "tensor_parallel_size": request.tensor_parallel_size,
        "dtype": str(request.dtype),
        "kv_cache_dtype": request.kv_cache_dtype,
        "block_size": params.block_size,
        "groups": groups,
        "bytes_per_block": bpb,
        "num_blocks": num_blocks,
        "decided_by": sizing.decided_by,
        "kv_cache_memory_bytes": params.kv_cache_memory_bytes,
        "kv_cache_tokens": port["kv_cache_tokens"],
        "max_model_len": max_len,
        "max_concurrency": port["max_concurrency"],
        "warnings": [str(w.message) for w in caught],
        "vllm_pool": _vllm_pool(probe, params, sizing.decided_by, port, max_len, batched or max_len),
    }


def _vllm_pool(probe: KVCacheConfig, params: EngineParams, decided_by: str, port: dict[str, Any], max_len: int,
               batched: int) -> dict[str, Any]:
    """vLLM 0.33.0's model of the same pool: the override's block count, else the same memory in its blocks.

    ``--num-blocks`` is vLLM's ``num_gpu_blocks_override``; ``--kv-cache-memory`` is its available memory; without
    either (no memory profile here) it gets the memory the C++ port's pool takes, so the two carve up one budget.
    """
    result: dict[str, Any] = {"label": VLLM_LABEL, "vllm_version": VLLM_VERSION, "computed": False, "reason": None,
                              "agrees_with_port": None, "groups": [], "bytes_per_block": None, "num_blocks": None,
                              "decided_by": None, "available_memory_bytes": None, "kv_cache_tokens": None,
                              "blocks_per_request": None, "max_in_flight_tokens": None, "max_concurrency": None}
    reason = unmodelled_reason(probe)
    if reason is not None:
        result["reason"] = reason
        return result
    if decided_by == "num_blocks":
        pool = vllm_pool(probe, max_len, batched, num_blocks_override=port["num_blocks"])
        available = None
    else:
        decided_by = decided_by if decided_by == "kv_cache_memory_bytes" else "port_pool_memory"
        available = (params.kv_cache_memory_bytes if decided_by == "kv_cache_memory_bytes"
                     else port["num_blocks"] * port["bytes_per_block"])
        pool = vllm_pool(probe, max_len, batched, available_memory=available)
    result.update(
        computed=True,
        groups=[{"group": i, "spec": type(g.spec).__name__, "layers": len(g.layer_names),
                 "page_size_bytes": g.spec.page_size_bytes, "bytes_per_block": g.bytes_per_block,
                 "blocks_per_request": g.blocks_per_request,
                 "sliding_window": g.spec.sliding_window if isinstance(g.spec, SlidingWindowSpec) else None}
                for i, g in enumerate(pool.groups)],
        bytes_per_block=pool.bytes_per_block, num_blocks=pool.num_blocks, decided_by=decided_by,
        available_memory_bytes=available, kv_cache_tokens=pool.kv_cache_tokens,
        blocks_per_request=pool.blocks_per_request, max_in_flight_tokens=pool.max_in_flight_tokens,
        max_concurrency=pool.max_concurrency,
    )
    result["agrees_with_port"] = all(result[key] == port[key] for key in _COMPARED)
    return result


def render(result: dict[str, Any]) -> str:
    """The plan as log-style text lines."""
    lines = [f"Model: {result['architecture']} ({result['model_config']}), tensor_parallel_size="
             f"{result['tensor_parallel_size']}, dtype={result['dtype']}, kv_cache_dtype={result['kv_cache_dtype']}, "
             f"block_size={result['block_size']}"]
    for g in result["groups"]:
        if g["bytes_per_block"]:
            lines.append(f"  KV cache group {g['group']}: {g['spec']} x {g['layers']} layers, {g['page_size_bytes']:,} "
                         f"bytes per layer per block = {g['bytes_per_block']:,} bytes per block")
        else:
            lines.append(f"  KV cache group {g['group']}: {g['spec']} x {g['layers']} layers, "
                         f"{g['state_bytes_per_sequence']:,} bytes of state per sequence (not per block)")
    lines.append(f"{PORT_LABEL} (what ROAD-V1-MEM gates)")
    decided = _DECIDED_BY[result["decided_by"]]
    if result["decided_by"] == "kv_cache_memory_bytes":
        decided += f": {result['kv_cache_memory_bytes']:,} // {result['bytes_per_block']:,}"
    lines += _pool_lines(result, result["max_model_len"], f"decided by {decided}")
    lines += _render_vllm(result["vllm_pool"], result["max_model_len"], result["block_size"])
    return "\n".join(lines)


def _pool_lines(pool: Mapping[str, Any], max_model_len: int, decided: str, block_note: str = "",
                concurrency_note: str = "") -> list[str]:
    """Bytes per block, block count, memory, token capacity and concurrency of one model, indented."""
    lines = [f"  KV bytes per block: {pool['bytes_per_block']:,} ({pool['bytes_per_block'] / 2**20:.2f} MiB)"
             f"{block_note}",
             f"  num_blocks: {pool['num_blocks']:,} ({decided})",
             f"  KV cache memory: {pool['num_blocks'] * pool['bytes_per_block'] / 2**30:.2f} GiB",
             f"  GPU KV cache size: {pool['kv_cache_tokens']:,} tokens"]
    if pool["max_concurrency"] is not None:
        lines.append(f"  Maximum concurrency for {max_model_len:,} tokens per request: "
                     f"{pool['max_concurrency']:.2f}x{concurrency_note}")
    return lines


def _render_vllm(pool: Mapping[str, Any], max_model_len: int, block_size: int) -> list[str]:
    """vLLM's model: one line when it is not computed or agrees with the port's, else its groups and figures."""
    if not pool["computed"]:
        return [f"{VLLM_LABEL}: not computed: {pool['reason']}"]
    if pool["agrees_with_port"]:  # only with one group: with more, the largest group is less than their sum
        return [f"{VLLM_LABEL}: agrees with the C++ port (one KV cache group: the same bytes per block, num_blocks, "
                "token capacity and maximum concurrency)"]
    lines = [VLLM_LABEL]
    for g in pool["groups"]:
        need = f"{g['blocks_per_request']:,} blocks per request"
        if g["sliding_window"] is not None:
            need += (f" (window {g['sliding_window']:,}: cdiv(min({g['sliding_window'] - 1:,} + "
                     f"{pool['max_in_flight_tokens']:,} tokens in flight, {max_model_len:,}), {block_size}) + 1)")
        lines.append(f"  KV cache group {g['group']}: {g['spec']} x {g['layers']} layers, {g['page_size_bytes']:,} "
                     f"bytes per layer per block = {g['bytes_per_block']:,} bytes; {need}")
    decided = _VLLM_DECIDED_BY[pool["decided_by"]]
    if pool["available_memory_bytes"] is not None:
        decided += f": {pool['available_memory_bytes']:,} // {pool['bytes_per_block']:,}"
    note = f" ({pool['num_blocks']:,} blocks / {pool['blocks_per_request']:,} blocks per request)"
    whose = ", the largest group's" if len(pool["groups"]) > 1 else ", its one group's"
    return lines + _pool_lines(pool, max_model_len, f"decided by {decided}", whose, note)


def _run(argv: Sequence[str] | None) -> int:
    """Parse, plan and print; a refused flag or config is one line on stderr and exit status 2."""
    args = build_parser().parse_args(argv)
    try:
        result = plan(args)
    except ValueError as err:
        print(f"kv-plan: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    for message in result["warnings"]:
        print(f"WARNING: {message}", file=sys.stderr)
    sys.stdout.write((json.dumps(result, indent=2) if args.json else render(result)) + "\n")
    sys.stdout.flush()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """kv-plan: 0 with a plan; 2 on a bad flag or config; 0 and nothing more when the reader closes the pipe
    (``kv-plan ... | head -3``); one line and 130 on Ctrl-C (issue 14: never a traceback)."""
    return run_console("kv-plan", lambda: _run(argv))


if __name__ == "__main__":
    sys.exit(main())
