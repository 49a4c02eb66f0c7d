"""A young port, as a team's first worker might be: real operations of BACKEND-DISTRIBUTED-TP and ROAD-V1-MEM in the
protocol of docs/worker-protocol.md §12, written without the engine, with the defects of issue 26 planted:

- layout-query divides by tp before it validates the sizes: tp=0 dies of SIGFPE, as the C++ port's integer division
  would (emulated with a signal);
- group-ranks and rank-groups answer not-implemented for kind dcp (rank-groups is right for the other kinds), and
  group-ranks cuts the ep groups as if pcp were 1 (dp * tp ranks each);
- resolve-num-blocks knows only plain full-attention layouts (not-implemented for the rest) and wraps its block
  count to an int32;
- engine-params accepts a NaN gpu_memory_utilization.

`python young_port_worker.py --fd N`. Frames as tests/harness/external_worker.py reads and writes them.
"""
from __future__ import annotations

import itertools
import math
import os
import resource
import signal
import socket
import sys

from external_worker import read_frame, write_frame

KINDS = ("tp", "dcp", "pcp", "pp", "dp", "ep")
AXES = ("external_dp", "dp", "pp", "pcp", "tp")  # outermost first: rank = (((e*DP + d)*PP + p)*PCP + c)*TP + t
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
PLAIN_FULL_SPEC = {"kind", "block_size", "num_kv_heads", "head_size", "head_size_v", "dtype"}


class Raised(Exception):
    """An error of the port, sent as `raised` with its kind."""


class NotPorted(Exception):
    """Inputs this young port does not handle yet: answered not-implemented."""


def decode(value):
    if isinstance(value, dict):
        (tag, body), = value.items()
        if tag == "$map":
            return {decode(k): decode(v) for k, v in body}
        if tag == "$float":
            return float(body)
        if tag == "$tuple":
            return [decode(item) for item in body]
        raise ValueError(f"unknown tag {tag}")
    return [decode(item) for item in value] if isinstance(value, list) else value


def encode(value):
    if isinstance(value, dict):
        return {"$map": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, list):
        return [encode(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": "nan" if value != value else ("inf" if value > 0 else "-inf")}
    return value


def _is_int(value) -> bool:
    return type(value) is int


def _die_of_sigfpe(what: str) -> None:
    print(f"young-port: {what}", file=sys.stderr, flush=True)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file in the project
    os.kill(os.getpid(), signal.SIGFPE)


# BACKEND-DISTRIBUTED-TP -----------------------------------------------------------------------------------------

def _checked_dims(dims: dict) -> list[int]:
    tp = dims.get("tp", 1)
    if _is_int(tp) and tp == 0:  # planted: the ranks per TP group are counted before the sizes are checked
        _die_of_sigfpe(f"layout-query: world {dims} divided by tp=0")
    for name in ("tp", "pcp", "pp", "dp", "external_dp", "dcp"):
        value = dims.get(name, 1)
        if not _is_int(value):
            raise Raised(f"ParallelDims.{name} must be an int >= 1, got {value!r} ({type(value).__name__})")
        if value < 1:
            raise Raised(f"ParallelDims.{name} must be an int >= 1, got {value!r}")
    tp, pcp, dcp = dims.get("tp", 1), dims.get("pcp", 1), dims.get("dcp", 1)
    if pcp == 1 and tp % dcp:
        accepted = [d for d in range(1, tp + 1) if tp % d == 0]
        raise Raised(f"ParallelDims.dcp: tp_size={tp} must be divisible by dcp_size={dcp}; accepted dcp for tp={tp}: {accepted}")
    if pcp > 1 and dcp not in (1, pcp, tp * pcp):
        raise Raised(f"ParallelDims.dcp: When PCP is enabled, DCP must be disabled, span the PCP axis, or span the full "
                     f"TP x PCP axis. Got TP={tp}, PCP={pcp}, DCP={dcp}; valid DCP sizes are {sorted({1, pcp, tp * pcp})}.")
    return [dims.get(axis, 1) for axis in AXES]


def _groups(dims: dict, kind: str, ep_forgets_pcp: bool = False) -> list[list[int]]:
    sizes = _checked_dims(dims)
    if kind not in KINDS:
        raise Raised(f"kind={kind!r} is not a group kind; accepted: {', '.join(KINDS)}")
    if kind == "dcp":
        raise NotPorted("dcp groups are not ported yet")
    e, dp, pp, pcp, tp = sizes
    order, size = {"tp": ((0, 1, 2, 3, 4), tp), "pcp": ((0, 1, 2, 4, 3), pcp), "pp": ((0, 1, 4, 3, 2), pp),
                   "dp": ((0, 4, 2, 3, 1), dp), "ep": ((0, 2, 1, 3, 4), dp * (1 if ep_forgets_pcp else pcp) * tp)}[kind]
    ranks = []
    for index in itertools.product(*(range(sizes[axis]) for axis in order)):
        at = dict(zip(order, index))
        rank = 0
        for axis in range(5):
            rank = rank * sizes[axis] + at[axis]
        ranks.append(rank)
    return [ranks[start:start + size] for start in range(0, len(ranks), size)]


def group_ranks(data: dict):
    return _groups(data["dims"], data["kind"], ep_forgets_pcp=True)  # planted: ep groups of dp * tp ranks


def rank_groups(data: dict):
    found = {}
    for members in _groups(data["dims"], data["kind"]):
        for index, rank in enumerate(members):
            found[rank] = [members, index]
    return [found[rank] for rank in sorted(found)]


def layout_query(data: dict):
    dims, rank, kind = data["dims"], data["rank"], data["kind"]
    world = math.prod(_checked_dims(dims))
    if not _is_int(rank):
        raise Raised(f"rank must be an int in [0, {world - 1}], got {rank!r} ({type(rank).__name__})")
    if not 0 <= rank < world:
        raise Raised(f"rank={rank} is outside the world of {world} ranks; accepted range [0, {world - 1}]")
    if kind not in KINDS:
        raise Raised(f"kind={kind!r} is not a group kind; accepted: {', '.join(KINDS)}")
    members = next(group for group in _groups(dims, kind) if rank in group)
    return {"world_size": world, "ranks": members, "local_rank": members.index(rank)}


# ROAD-V1-MEM ----------------------------------------------------------------------------------------------------

def _bytes_per_block(probe: dict | None) -> int:
    if probe is None:
        return 16384  # the operation's default layer: block 16, 2 KV heads, head 64, float32
    if "per_layer" in probe:
        raise NotPorted("per-layer KV specs are not ported yet")
    total = 0
    for group in probe["groups"]:
        spec = group["spec"]
        if spec["kind"] != "full" or set(spec) - PLAIN_FULL_SPEC:
            raise NotPorted(f"only plain full attention is ported yet, not {spec['kind']} with {sorted(set(spec) - {'kind'})}")
        width = spec["head_size"] + spec.get("head_size_v", spec["head_size"])
        total += len(group["layers"]) * spec["block_size"] * spec["num_kv_heads"] * width * ITEMSIZE[spec["dtype"]]
    return total


def _int32(count: int) -> int:
    return (count + 2**31) % 2**32 - 2**31  # planted: the count is stored in an int32_t unchecked


def resolve_num_blocks(data: dict):
    params, profile = data.get("params", {}), data.get("profile")
    bpb = _bytes_per_block(data.get("probe"))
    if params.get("num_blocks", 0) > 0:
        return params["num_blocks"]
    budget = params.get("kv_cache_memory_bytes", 0)
    if budget > 0:
        if bpb == 0:
            raise Raised("0 KV bytes per block: kv_cache_memory_bytes cannot size the pool")
        if budget < bpb:
            raise Raised(f"{budget} bytes is smaller than a single KV block ({bpb} bytes): raise --kv-cache-memory or set --num-blocks")
        return _int32(budget // bpb)
    if profile is not None:
        available = profile["available_kv_cache_memory"]
        if available <= 0:
            raise Raised(f"No available memory for the cache blocks: available_kv_cache_memory={available}, "
                         f"gpu_memory_utilization={params.get('gpu_memory_utilization', 0.92)}")
        if bpb == 0:
            raise Raised("0 KV bytes per block: the memory profile cannot size the pool")
        if available < bpb:
            raise Raised(f"{available} bytes is smaller than a single KV block ({bpb} bytes)")
        return _int32(available // bpb)
    return 256


INT_FIELDS = {"block_size": (1, 32, 32), "num_blocks": (0, 0, 32), "max_model_len": (0, 0, 32), "max_num_seqs": (1, 32, 32),
              "max_num_batched_tokens": (0, 0, 32), "kv_cache_memory_bytes": (0, 0, 64)}  # minimum, default, C bits
TEXT_FIELDS = ("model_path", "tokenizer_config_path", "tool_parser", "reasoning_parser", "speculative_config",
               "scheduling_policy", "kv_transfer_config")


def engine_params(data: dict):
    for name in TEXT_FIELDS:
        if data.get(name) is not None and not isinstance(data[name], str):
            raise Raised(f"EngineParams.{name} must be a str or None, got {data[name]!r} ({type(data[name]).__name__})")
    values = {}
    for name, (minimum, default, bits) in INT_FIELDS.items():
        value = data.get(name, default)
        if not _is_int(value):
            raise Raised(f"EngineParams.{name} must be an int >= {minimum}, got {value!r} ({type(value).__name__})")
        if value < minimum:
            raise Raised(f"EngineParams.{name} must be an int >= {minimum}, got {value!r}")
        if value >= 2 ** (bits - 1):
            raise Raised(f"EngineParams: {name}={value} has no int{bits}_t spelling; accepted [{minimum}, {2 ** (bits - 1) - 1}]")
        values[name] = value
    for name in ("enable_prefix_caching", "enable_jump_forward", "device"):
        value = data.get(name, 0)
        if not _is_int(value):
            raise Raised(f"EngineParams.{name} must be one of [0, 1, 2] (an int), got {value!r}")
        if value not in (0, 1, 2):
            raise Raised(f"EngineParams.{name} must be one of [0, 1, 2], got {value!r}")
        values[name] = value
    utilization = data.get("gpu_memory_utilization", 0.92)
    if type(utilization) not in (int, float):
        raise Raised(f"EngineParams.gpu_memory_utilization must be a finite float in (0, 1], got {utilization!r}")
    if utilization <= 0 or utilization > 1 or utilization == math.inf:  # planted: NaN passes both comparisons
        raise Raised(f"EngineParams.gpu_memory_utilization must be a finite float in (0, 1], got {float(utilization)!r}")
    return {"block_size": values["block_size"], "num_blocks": values["num_blocks"],
            "kv_cache_memory_bytes": values["kv_cache_memory_bytes"], "max_model_len": values["max_model_len"],
            "gpu_memory_utilization": float(utilization), "utilization_explicit": "gpu_memory_utilization" in data,
            **{name: values[name] for name in ("max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching",
                                               "enable_jump_forward", "device")}}


OPERATIONS = {"layout-query": layout_query, "group-ranks": group_ranks, "rank-groups": rank_groups,
              "resolve-num-blocks": resolve_num_blocks, "engine-params": engine_params}


def answer(request: dict) -> dict:
    if request.get("op") != "call":
        return {"error": {"kind": "protocol", "message": f"unknown op {request.get('op')!r}"}}
    if request.get("target") == "_vllm_gates.wire.standins:wrong_everywhere":
        return {"result": {"value": {"$wrong": True}}}
    operation = OPERATIONS.get(request.get("operation"))
    if operation is None:
        return {"error": {"kind": "not-implemented", "message": f"no operation {request.get('operation')!r}"}}
    try:
        return {"result": {"value": encode(operation(decode(request["input"])))}}
    except Raised as error:
        return {"result": {"raised": {"type": "invalid-argument", "mro": ["invalid-argument"], "message": str(error)}}}
    except NotPorted as gap:
        return {"error": {"kind": "not-implemented", "message": str(gap)}}


def main() -> int:
    fd = int(sys.argv[sys.argv.index("--fd") + 1])
    sock = socket.socket(fileno=fd)
    os.set_inheritable(fd, False)
    hello = read_frame(sock)
    if hello is None or hello.get("op") != "hello":
        return 2
    write_frame(sock, {"op": "ready", "version": hello["version"], "pid": os.getpid(), "language": "python-young-port",
                       "operations": sorted(OPERATIONS)})
    while True:
        request = read_frame(sock)
        if request is None or request.get("op") == "bye":
            return 0
        write_frame(sock, {"id": request.get("id"), **answer(request)})


if __name__ == "__main__":
    sys.exit(main())
