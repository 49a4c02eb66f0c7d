"""The example CLI: flags through vllm_model_params reach the EngineParams of the Python path (CAPI-10)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gates.rows.capi_abi.compare import same_engine_params
from gates.rows.capi_abi.subjects import describe, engine_params_via_c, engine_params_via_python
from impl.entrypoints import example_cli

pytestmark = pytest.mark.cpu


@pytest.mark.parametrize("argv", [
    [], ["--gpu-memory-utilization", "0.92"], ["--kv-cache-memory", "4GiB"], ["--kv-cache-memory-bytes", "1.5k"],
    ["--num-blocks", "7", "--block-size", "16", "--max-model-len", "4096", "--model", "/m/é"],
])
def test_c_path_equals_python_path(argv):
    via_c = engine_params_via_c(argv)
    assert via_c == describe(example_cli.engine_params_via_c(argv))
    assert same_engine_params(via_c, engine_params_via_python(argv))


def test_engine_params_views_are_plain_and_strict():
    view = engine_params_via_c([])
    assert type(view["gpu_memory_utilization"]) is float and view["gpu_memory_utilization"] == 0.92
    assert view["gpu_memory_utilization_is_explicit"] is False
    assert same_engine_params(view, {"gpu_memory_utilization": 0.92, "block_size": 32})
    assert not same_engine_params(view, {"block_size": 32.0})  # types count
    assert not same_engine_params(view, {"gpu_memory_utilization_is_explicit": 0})
    assert not same_engine_params(view, {"no_such_field": 1})
    assert not same_engine_params(example_cli.engine_params_via_c([]), view)  # only the plain view is compared


def test_absent_utilization_is_written_as_zero_and_reads_as_default():
    args = example_cli.build_parser().parse_args([])
    assert example_cli.model_params_from_args(args).gpu_memory_utilization == 0.0
    assert not example_cli.engine_params_via_c([]).gpu_memory_utilization_is_explicit


def test_main_prints_the_struct_and_what_the_engine_reads(capsys):
    assert example_cli.main(["--kv-cache-memory", "4GiB"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["vllm_model_params"]["kv_cache_memory_bytes"] == 4 * 2**30
    assert report["vllm_model_params"]["gpu_memory_utilization"] == 0.0
    assert report["engine_params"]["gpu_memory_utilization"] == 0.92
    assert report["gpu_memory_utilization_is_explicit"] is False


@pytest.mark.parametrize("argv", [["--gpu-memory-utilization", "0"], ["--kv-cache-memory", "4gb"], ["--nope"],
                                  ["--block-size", "2147483648"]])
def test_main_refuses_bad_flags_with_exit_2(capsys, argv):
    assert example_cli.main(argv) == 2
    assert capsys.readouterr().err.startswith("example-cli: error: ")


def test_example_cli_starts_without_torch():
    code = "import sys, impl.entrypoints.example_cli; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2]).returncode == 0
