"""kv-plan as a user meets it (issue 14): bad input is one line naming the flag or the file and field, exit 2,
never a traceback; a closed pipe ends it quietly; Ctrl-C is one line; no torch on its path. The C ABI bounds
behind it: EngineParams and the ctypes mirror refuse integers their C members cannot hold."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from impl.capi.abi import ModelParams
from impl.capi.errors import InvalidArgument
from impl.entrypoints.model_loader import EngineParams

pytestmark = pytest.mark.cpu

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "gates" / "rows" / "road_v1_mem" / "fixtures" / "models"
LLAMA = FIXTURES / "llama-3.1-8b.json"


def kv_plan(*argv: str, timeout: float = 30, **popen: Any) -> subprocess.CompletedProcess[str]:
    """``python -m impl.entrypoints.kv_plan ARGV`` from the repository root, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "impl.entrypoints.kv_plan", *argv], cwd=REPO, text=True,
                          capture_output=not popen, timeout=timeout, **popen)


def refusal(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Assert exit 2, no traceback and one error line containing every needle; return that line."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    error = lines[-1]
    assert error.startswith("kv-plan: error: ") and all(line.startswith(("usage:", " ")) for line in lines[:-1])
    for needle in needles:
        assert needle in error, (needle, error)
    return error


def config_file(tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> str:
    """The Llama-3.1-8B fixture with ``change`` applied, written to a file in ``tmp_path``."""
    cfg = json.loads(LLAMA.read_text(encoding="utf-8"))
    change(cfg)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return str(path)


def with_fields(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda cfg: cfg.update(fields)


def without(name: str) -> Callable[[dict[str, Any]], None]:
    return lambda cfg: cfg.pop(name)


# --- flags: the flag named once, as typed; what is accepted ------------------------------------------------

@pytest.mark.parametrize(("argv", "needles"), [
    (["--num-blocks", "9223372036854775808"], ["argument --num-blocks: '9223372036854775808'", "at most 2147483647",
                                               "int32_t"]),
    (["--num-blocks", "1" + "0" * 400], ["argument --num-blocks:", "out of range"]),
    (["--block-size", "3000000000"], ["argument --block-size: '3000000000'", "at most 2147483647"]),
    (["--max-model-len", "2147483648"], ["argument --max-model-len:", "at most 2147483647"]),
    (["--max-num-batched-tokens", "2147483648"], ["argument --max-num-batched-tokens:", "at most 2147483647"]),
    (["--kv-cache-memory", "100000000000000000000000000000TiB"],
     ["argument --kv-cache-memory: '100000000000000000000000000000TiB'", "at most 9223372036854775807 bytes",
      "int64_t"]),
    (["--kv-cache-memory", "1" + "0" * 400], ["argument --kv-cache-memory:", "too long for a size"]),
    (["--kv-cache-memory", "lots"], ["argument --kv-cache-memory: cannot read 'lots' as a size"]),
    (["--kv-cache-memory-bytes", "4.5G"], ["argument --kv-cache-memory-bytes: '4.5G' has a fraction"]),
    (["--gpu-memory-utilization", "０.５"], ["argument --gpu-memory-utilization: expected a number", "'０.５'",
                                             "ASCII digits"]),
    (["--gpu-memory-utilization", "0.9_2"], ["argument --gpu-memory-utilization:", "'0.9_2'"]),
    (["--gpu-memory-utilization", "1e-1"], ["argument --gpu-memory-utilization:", "'1e-1'"]),
    (["--num-blocks", "５"], ["argument --num-blocks: expected an integer, got '５'"]),
    (["--num-blocks", "1_0"], ["argument --num-blocks: expected an integer, got '1_0'"]),
    (["--tensor-parallel-size", "+2"], ["argument --tensor-parallel-size: expected an integer, got '+2'"]),
    (["--kv-cache-dtype", "fp4"], ["argument --kv-cache-dtype: invalid choice: 'fp4'"]),
])
def test_a_bad_flag_value_is_refused_at_the_flag(argv, needles):
    error = refusal(kv_plan("--model-config", str(LLAMA), *argv), *needles)
    assert "/--kv-cache-memory" not in error and error.count(argv[0]) == 1


@pytest.mark.parametrize(("argv", "needles"), [
    (["--gpu-memory-utilization", "0"], ["--gpu-memory-utilization must be a finite float in (0, 1], got 0.0"]),
    (["--gpu-memory-utilization", "1.5"], ["--gpu-memory-utilization must be a finite float in (0, 1], got 1.5"]),
    (["--num-blocks=-2"], ["--num-blocks must be an int >= 0, got -2"]),
    (["--block-size", "0"], ["--block-size must be an int >= 1, got 0"]),
    (["--max-num-batched-tokens=-1"], ["--max-num-batched-tokens must be an int >= 0, got -1"]),
    (["--tensor-parallel-size", "0"], ["--tensor-parallel-size must be an int >= 1, got 0"]),
])
def test_a_range_refusal_names_the_flag_not_the_field(argv, needles):
    error = refusal(kv_plan("--model-config", str(LLAMA), *argv), *needles)
    assert "EngineParams" not in error and "ProbeRequest" not in error and "_" not in error.split(" must ")[0]


def test_a_budget_that_makes_more_blocks_than_an_int32_is_refused():
    refusal(kv_plan("--model-config", str(LLAMA), "--kv-cache-memory", "8000000000000000000"),
            "--kv-cache-memory 8000000000000000000 bytes makes 1907348632812 KV blocks", "2147483647",
            "--num-blocks")


def test_max_model_len_above_the_models_is_refused_as_vllm_does():
    error = refusal(kv_plan("--model-config", str(LLAMA), "--max-model-len", "131073"),
                    "--max-model-len 131073 is greater than the derived max_model_len",
                    "max_position_embeddings=131072", str(LLAMA), "give at most 131072")
    assert "vLLM refuses" in error
    plan = json.loads(kv_plan("--model-config", str(LLAMA), "--max-model-len", "131072", "--json").stdout)
    assert plan["max_model_len"] == 131072


def test_the_default_length_is_vllms_derived_one_yarn_scaled():
    deepseek = json.loads(kv_plan("--model-config", str(FIXTURES / "deepseek-v2-lite.json"), "--json").stdout)
    assert deepseek["max_model_len"] == 4096 * 40  # rope_scaling yarn: original_max_position_embeddings x factor


# --- the config file: named with the field; read with limits --------------------------------------------

@pytest.mark.parametrize(("change", "needles"), [
    (with_fields(architectures={"x": 1}), ["'architectures' must be a non-empty JSON list", "{'x': 1}"]),
    (with_fields(architectures="abc"), ["'architectures' must be a non-empty JSON list", "'abc'"]),
    (with_fields(use_sliding_window="false", sliding_window=4096),
     ["'use_sliding_window' must be a JSON boolean (true or false, unquoted), got 'false'"]),
    (with_fields(num_hidden_layers="32"), ["'num_hidden_layers' must be a JSON integer", "got '32'"]),
    (with_fields(head_dim=2**40), ["'head_dim' must be a JSON integer from 1 to 2147483647"]),
    (with_fields(max_position_embeddings=0), ["'max_position_embeddings' must be a JSON integer"]),
    (with_fields(rope_scaling={"rope_type": "linear", "factor": "2"}), ["'rope_scaling.factor' must be a positive"]),
    (without("torch_dtype"), ["has no 'torch_dtype' (or 'dtype')", "--dtype float16|bfloat16|float32"]),
    (with_fields(torch_dtype="int4"), ["'torch_dtype' must be one of", "'int4'", "--dtype"]),
    (without("num_attention_heads"), ["no 'num_attention_heads'"]),
])
def test_a_bad_config_field_is_named_with_the_file(tmp_path, change, needles):
    path = config_file(tmp_path, change)
    refusal(kv_plan("--model-config", path), path, *needles)


def test_a_huge_layer_count_fails_fast(tmp_path):
    path = config_file(tmp_path, with_fields(num_hidden_layers=10**8))
    refusal(kv_plan("--model-config", path, timeout=10), path,
            "'num_hidden_layers' must be a JSON integer from 1 to 10000, got 100000000")


def test_a_config_without_torch_dtype_plans_with_dtype(tmp_path):
    path = config_file(tmp_path, without("torch_dtype"))
    plan = json.loads(kv_plan("--model-config", path, "--dtype", "float16", "--json").stdout)
    assert plan["dtype"] == "float16" and plan["bytes_per_block"] == 4194304


@pytest.mark.parametrize(("text", "needles"), [
    ('{"a": 1,\n "b": 2,}', ["not valid JSON: Expecting property name enclosed in double quotes (line 2, column 9)"]),
    ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", ["nested more than 64 deep"]),
    ('{"a": 1, "a": 2}', ["the key 'a' appears twice"]),
    ('{"num_hidden_layers": NaN}', ["NaN is not a JSON number"]),
    ('{"head_dim": ' + "9" * 5000 + "}", ["an integer of 5000 digits"]),
    ("[1, 2]", ["expected a JSON object"]),
])
def test_malformed_json_is_named_with_the_file(tmp_path, text, needles):
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    refusal(kv_plan("--model-config", str(path)), str(path), *needles)


def test_non_utf8_config_is_refused(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"a": "\xff"}')
    refusal(kv_plan("--model-config", str(path)), str(path), "is not UTF-8 text")


@pytest.mark.parametrize(("path", "kind"), [("/dev/zero", "a character device"), ("/", "a directory")])
def test_a_non_regular_file_is_refused_unread(path, kind):
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist here")
    refusal(kv_plan("--model-config", path, timeout=10), f"{path} is {kind}", "must be a regular file")


def test_a_missing_file_is_named(tmp_path):
    refusal(kv_plan("--model-config", str(tmp_path / "none.json")), str(tmp_path / "none.json"),
            "No such file or directory")


# --- pipes, signals, start-up ---------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["impl.entrypoints.kv_plan", "--model-config", str(LLAMA), "--json"],
                                     ["impl.entrypoints.example_cli", "--kv-cache-memory", "4GiB"]])
def test_a_closed_pipe_ends_quietly(command):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command writes
    try:
        done = subprocess.run([sys.executable, "-m", *command], cwd=REPO, stdout=write_end, stderr=subprocess.PIPE,
                              text=True, timeout=30)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (0, "")


def test_head_reads_three_lines_without_a_traceback():
    command = f"{sys.executable} -m impl.entrypoints.kv_plan --model-config {LLAMA} | head -3"
    done = subprocess.run(["sh", "-c", command], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 3 and done.stderr == ""


def test_ctrl_c_is_one_line_and_130():
    # Python installs its Ctrl-C handler only where SIGINT is not ignored, and a pytest-xdist worker's children
    # inherit it ignored: the child installs it as a terminal's process has it. plan then waits (boundedly) for the
    # interrupt, which Python raises at its next check for pending signals, not necessarily before plan returns.
    code = ("import os, signal, sys, time\nfrom impl.entrypoints import kv_plan\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "def plan(args):\n    os.kill(os.getpid(), signal.SIGINT)\n"
            "    for _ in range(500):\n        time.sleep(0.01)\n"
            "kv_plan.plan = plan\nsys.exit(kv_plan.main())")
    done = subprocess.run([sys.executable, "-c", code, "--model-config", str(LLAMA)], cwd=REPO, capture_output=True,
                          text=True, timeout=30)
    assert (done.returncode, done.stderr) == (130, "kv-plan: interrupted\n")


def test_kv_plan_runs_without_torch():
    code = ("import sys\nfrom impl.entrypoints import kv_plan\n"
            f"code = kv_plan.main(['--model-config', {str(LLAMA)!r}, '--json'])\n"
            "sys.exit(code or ('torch' in sys.modules and 'torch was imported'))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["bytes_per_block"] == 4194304


# --- the C ABI bounds behind the flags ------------------------------------------------------------------

@pytest.mark.parametrize(("fields", "pattern"), [
    ({"block_size": 2**31}, r"block_size=2147483648 has no int32_t spelling"),
    ({"num_blocks": 2**63}, r"num_blocks=9223372036854775808 has no int32_t spelling"),
    ({"kv_cache_memory_bytes": 2**63}, r"kv_cache_memory_bytes=9223372036854775808 has no int64_t spelling"),
])
def test_engine_params_refuse_what_their_c_member_cannot_hold(fields, pattern):
    with pytest.raises(InvalidArgument, match=pattern):
        EngineParams(**fields)
    assert EngineParams(block_size=2**31 - 1, kv_cache_memory_bytes=2**63 - 1).block_size == 2**31 - 1


def test_engine_params_refuse_a_float_device():
    with pytest.raises(TypeError, match=r"device must be one of \[0, 1, 2\] \(an int\), got 2.0 \(float\)"):
        EngineParams(device=2.0)


@pytest.mark.parametrize(("member", "value"), [("block_size", 2**32 + 5), ("num_blocks", -2**31 - 1),
                                               ("kv_cache_memory_bytes", 2**63)])
def test_the_ctypes_mirror_never_wraps(member, value):
    with pytest.raises(OverflowError, match=f"vllm_model_params.{member} is an int(32|64)_t: {value} does not fit"):
        ModelParams(**{member: value})
    params = ModelParams()
    with pytest.raises(OverflowError):
        setattr(params, member, value)
    assert getattr(params, member) == 0
    params.block_size, params.kv_cache_memory_bytes = -2**31, 2**63 - 1
    assert (params.block_size, params.kv_cache_memory_bytes) == (-2**31, 2**63 - 1)


# --- the two allocation models (issue 13, item 4) -------------------------------------------------------

GEMMA2 = FIXTURES / "gemma-2-9b-it.json"
PORT_HEADER = "C++ port: summed over layers (what ROAD-V1-MEM gates)"
VLLM_HEADER = "vLLM 0.33.0: pool shared by KV cache groups"
EXISTING_KEYS = {"model_config", "architecture", "tensor_parallel_size", "dtype", "kv_cache_dtype", "block_size",
                 "groups", "bytes_per_block", "num_blocks", "decided_by", "kv_cache_memory_bytes", "kv_cache_tokens",
                 "max_model_len", "max_concurrency", "warnings"}


def plan_json(*argv: str) -> dict[str, Any]:
    done = kv_plan(*argv, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_gemma2_shows_both_models_with_vllms_block_half_ours():
    done = kv_plan("--model-config", str(GEMMA2), "--kv-cache-memory", "4GiB")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    port_at, vllm_at = lines.index(PORT_HEADER), lines.index(VLLM_HEADER)
    assert port_at < vllm_at
    port_text, vllm_text = "\n".join(lines[port_at:vllm_at]), "\n".join(lines[vllm_at:])
    assert "KV bytes per block: 11,010,048 (10.50 MiB)" in port_text and "num_blocks: 390 " in port_text
    assert "GPU KV cache size: 12,480 tokens" in port_text
    assert "KV bytes per block: 5,505,024 (5.25 MiB), the largest group's" in vllm_text
    assert "num_blocks: 780 " in vllm_text and "4,294,967,296 // 5,505,024" in vllm_text
    assert "GPU KV cache size: 12,455 tokens" in vllm_text
    assert "Maximum concurrency for 8,192 tokens per request: 1.52x (780 blocks / 513 blocks per request)" in vllm_text

    plan = plan_json("--model-config", str(GEMMA2), "--kv-cache-memory", "4GiB")
    assert EXISTING_KEYS | {"vllm_pool"} == set(plan)
    assert (plan["bytes_per_block"], plan["num_blocks"], plan["kv_cache_tokens"]) == (11010048, 390, 12480)
    assert [g["bytes_per_block"] for g in plan["groups"]] == [5505024, 5505024]  # the gated view, unchanged
    vllm = plan["vllm_pool"]
    assert vllm["computed"] and vllm["agrees_with_port"] is False and vllm["label"] == VLLM_HEADER
    assert vllm["bytes_per_block"] * 2 == plan["bytes_per_block"]
    assert (vllm["num_blocks"], vllm["decided_by"], vllm["available_memory_bytes"]) == (780, "kv_cache_memory_bytes",
                                                                                       4 * 2**30)
    assert [(g["spec"], g["layers"], g["blocks_per_request"]) for g in vllm["groups"]] == [
        ("SlidingWindowSpec", 21, 257), ("FullAttentionSpec", 21, 256)]
    assert vllm["blocks_per_request"] == 513 and vllm["max_in_flight_tokens"] == 2 * 8192
    assert vllm["max_concurrency"] == 780 / 513 and vllm["kv_cache_tokens"] == int(780 / 513 * 8192)


def test_a_sliding_window_group_takes_fewer_blocks_in_vllms_pool():
    plan = plan_json("--model-config", str(GEMMA2), "--num-blocks", "1000", "--max-num-batched-tokens", "1024")
    vllm = plan["vllm_pool"]
    # window 4096: cdiv(min(4095 + 2 * 1024 in flight, 8192), 32) + 1 = 193; full attention: 8192 / 32 = 256
    assert [g["blocks_per_request"] for g in vllm["groups"]] == [193, 256]
    assert (vllm["num_blocks"], vllm["decided_by"], vllm["available_memory_bytes"]) == (1000, "num_blocks", None)
    assert plan["num_blocks"] == 1000 and vllm["max_concurrency"] == 1000 / 449


def test_without_a_budget_vllms_pool_gets_the_ports_memory():
    plan = plan_json("--model-config", str(GEMMA2))
    vllm = plan["vllm_pool"]
    assert plan["decided_by"] == "fallback" and vllm["decided_by"] == "port_pool_memory"
    assert vllm["available_memory_bytes"] == 256 * 11010048 and vllm["num_blocks"] == 512


def test_llama_says_the_models_agree_in_one_line():
    done = kv_plan("--model-config", str(LLAMA), "--kv-cache-memory", "4GiB")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1].startswith(f"{VLLM_HEADER}: agrees with the C++ port (one KV cache group")
    assert sum(VLLM_HEADER in line for line in lines) == 1
    assert sum("KV bytes per block" in line for line in lines) == 1 and PORT_HEADER in lines
    plan = plan_json("--model-config", str(LLAMA), "--kv-cache-memory", "4GiB")
    vllm = plan["vllm_pool"]
    assert vllm["agrees_with_port"] is True and len(vllm["groups"]) == 1
    for key in ("bytes_per_block", "num_blocks", "kv_cache_tokens", "max_concurrency"):
        assert vllm[key] == plan[key], key


def test_a_five_to_one_pattern_splits_the_sliding_layers_into_groups_of_the_full_layers_count(tmp_path):
    types = (["sliding_attention"] * 5 + ["full_attention"]) * 2
    path = config_file(tmp_path, with_fields(num_hidden_layers=12, layer_types=types, sliding_window=1024))
    plan = plan_json("--model-config", path, "--kv-cache-memory", "1GiB", "--max-model-len", "8192")
    vllm = plan["vllm_pool"]
    assert [(g["spec"], g["layers"]) for g in vllm["groups"]] == [("SlidingWindowSpec", 2)] * 5 + [
        ("FullAttentionSpec", 2)]
    assert vllm["bytes_per_block"] * 6 == plan["bytes_per_block"]
    # each sliding group: cdiv(min(1023 + 16384, 8192), 32) + 1 = 257 (in flight covers the whole length)
    assert vllm["blocks_per_request"] == 5 * 257 + 256


def test_vllms_pool_is_not_computed_for_a_mamba_hybrid_and_says_why():
    path = str(FIXTURES / "qwen3-next-80b-a3b.json")
    done = kv_plan("--model-config", path, "--kv-cache-memory", "4GiB")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith(f"{VLLM_HEADER}: not computed: ")
    plan = plan_json("--model-config", path, "--kv-cache-memory", "4GiB")
    assert plan["vllm_pool"]["computed"] is False and "_align_hybrid_block_size" in plan["vllm_pool"]["reason"]
    assert plan["bytes_per_block"] == 786432 and plan["vllm_pool"]["bytes_per_block"] is None
