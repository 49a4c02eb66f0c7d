"""``kv-plan``: how a model's KV pool would be sized, worded like vLLM's startup log (MEM-1.11, MEM-2.12).

Mirrors the "GPU KV cache size" / "Maximum concurrency" lines of vllm/v1/core/kv_cache_utils.py.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Any, Sequence

from impl.entrypoints.cli_args import add_sizing_arguments, engine_params_from_args, int_arg

_DECIDED_BY = {
    "num_blocks": "--num-blocks (override)",
    "kv_cache_memory_bytes": "--kv-cache-memory (budget // bytes per block)",
    "gpu_memory_utilization": "--gpu-memory-utilization (memory profile)",
    "fallback": "fallback: no memory profile yet (ROAD-V1-MEM M3), 256 blocks",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kv-plan", description="Plan the KV-cache pool of a model on one rank.")
    parser.add_argument("--model-config", required=True, metavar="PATH", help="the model's config.json")
    parser.add_argument("--tensor-parallel-size", type=int_arg, default=1, metavar="N", help="ranks (default: 1)")
    parser.add_argument("--dtype", default="auto", choices=("auto", "float16", "bfloat16", "float32"),
                        help="model dtype (default: the config's torch_dtype)")
    parser.add_argument("--kv-cache-dtype", default="auto", metavar="DTYPE",
                        help="KV storage: auto, fp8, fp8_e4m3, fp8_e5m2, fp8_ds_mla, int8_per_token_head, "
                             "fp8_per_token_head, nvfp4, or a model dtype (default: auto)")
    parser.add_argument("--max-num-batched-tokens", type=int_arg, default=0, metavar="T",
                        help="tokens per step, for sliding-window usage (default: max model length)")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    add_sizing_arguments(parser)
    return parser


def plan(args: argparse.Namespace) -> dict[str, Any]:
    """Resolve the pool for parsed flags; raises ValueError on a bad config or knob."""
    from impl.entrypoints.model_geometry import (
        MODEL_DTYPES,
        ProbeRequest,
        load_model_config,
        model_dtype,
        probe_kv_cache_config,
    )
    from impl.entrypoints.model_loader import resolve_kv_pool
    from impl.v1.kv_cache_interface import AttentionSpec, cdiv, kv_bytes_per_block

    params = engine_params_from_args(args)
    cfg = load_model_config(args.model_config)
    request = ProbeRequest(tensor_parallel_size=args.tensor_parallel_size,
                           dtype=None if args.dtype == "auto" else MODEL_DTYPES[args.dtype],
                           kv_cache_dtype=args.kv_cache_dtype, block_size=params.block_size)
    probe = probe_kv_cache_config(cfg, request)
    max_len = params.max_model_len or cfg.get("max_position_embeddings")
    if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 1:
        raise ValueError(f"--max-model-len is 0 and the config has no usable max_position_embeddings ({max_len!r})")
    batched = args.max_num_batched_tokens or None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sizing = resolve_kv_pool(params, probe)
    bpb = kv_bytes_per_block(probe)
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
    return {
        "model_config": str(args.model_config),
        "architecture": (cfg.get("architectures") or [cfg.get("model_type")])[0],
        "tensor_parallel_size": request.tensor_parallel_size,
        "dtype": str(request.dtype if request.dtype is not None else model_dtype(cfg)).removeprefix("torch."),
        "kv_cache_dtype": request.kv_cache_dtype,
        "block_size": params.block_size,
        "groups": groups,
        "bytes_per_block": bpb,
        "num_blocks": sizing.num_blocks,
        "decided_by": sizing.decided_by,
        "kv_cache_memory_bytes": params.kv_cache_memory_bytes,
        "kv_cache_tokens": sizing.num_blocks * params.block_size,
        "max_model_len": max_len,
        "max_concurrency": sizing.num_blocks / blocks_per_request if blocks_per_request else None,
        "warnings": [str(w.message) for w in caught],
    }


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
    lines.append(f"KV bytes per block: {result['bytes_per_block']:,} ({result['bytes_per_block'] / 2**20:.2f} MiB)")
    decided = _DECIDED_BY[result["decided_by"]]
    if result["decided_by"] == "kv_cache_memory_bytes":
        decided += f": {result['kv_cache_memory_bytes']:,} // {result['bytes_per_block']:,}"
    lines.append(f"num_blocks: {result['num_blocks']:,} (decided by {decided})")
    pool = result["num_blocks"] * result["bytes_per_block"]
    lines.append(f"KV cache memory: {pool / 2**30:.2f} GiB")
    lines.append(f"GPU KV cache size: {result['kv_cache_tokens']:,} tokens")
    if result["max_concurrency"] is not None:
        lines.append(f"Maximum concurrency for {result['max_model_len']:,} tokens per request: "
                     f"{result['max_concurrency']:.2f}x")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = plan(args)
    except (ValueError, TypeError, OSError) as err:
        print(f"kv-plan: error: {err}", file=sys.stderr)
        return 2
    for message in result["warnings"]:
        print(f"WARNING: {message}", file=sys.stderr)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
