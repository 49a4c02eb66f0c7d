"""Size strings and the shared sizing flags (MEM-1.9 to MEM-1.11)."""
from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from impl.entrypoints.cli_args import add_sizing_arguments, engine_params_from_args
from impl.entrypoints.sizes import parse_size

pytestmark = pytest.mark.cpu

GIB = 2**30


@pytest.mark.parametrize(("text", "expected"), [
    ("4294967296", 4 * GIB), ("0", 0), ("4GiB", 4 * GIB), ("4G", 4 * GIB), ("4g", 4 * 10**9), ("25.6k", 25600),
    ("4GB", 4 * 10**9), ("4 GB", 4 * 10**9), ("4 GiB", 4 * GIB), ("1.5GB", 1_500_000_000), ("512KiB", 524288),
    ("3T", 3 * 2**40), ("2t", 2 * 10**12), ("0.5m", 500_000), (" 16M\n", 16 * 2**20), ("1.000k", 1000),
])
def test_accepted_sizes(text, expected):
    assert parse_size(text, what="--kv-cache-memory") == expected


@pytest.mark.parametrize("text", ["4.5G", "1.5GiB", "0.5K", "1.0005k", "4gb", "4GIB", "4Gib", "4B", "4 B", "-1", "+1",
                                  "1e9", "1_000", "", " ", "3.0", "4.", ".5k", "4\tGB", "GiB", "4 GiB GiB", "٣"])
def test_refused_sizes_quote_the_text(text):
    with pytest.raises(ValueError) as err:
        parse_size(text, what="--kv-cache-memory")
    assert str(err.value).startswith("--kv-cache-memory: ") and repr(text) in str(err.value)


def test_4gib_is_never_4_bytes():
    assert parse_size("4GiB", what="x") != 4


def test_non_text_is_a_type_error():
    with pytest.raises(TypeError, match="must be given as text"):
        parse_size(4096, what="--kv-cache-memory")  # type: ignore[arg-type]


def parse(argv: list[str]):
    return engine_params_from_args(add_sizing_arguments(argparse.ArgumentParser()).parse_args(argv))


def test_flags_map_onto_engine_params():
    params = parse(["--block-size", "16", "--num-blocks", "64", "--kv-cache-memory", "4GiB", "--max-model-len", "8192"])
    assert (params.block_size, params.num_blocks, params.kv_cache_memory_bytes, params.max_model_len) == \
        (16, 64, 4 * GIB, 8192)
    assert not params.gpu_memory_utilization_is_explicit
    assert parse(["--gpu-memory-utilization", "0.92"]).gpu_memory_utilization_is_explicit
    assert parse(["--kv-cache-memory-bytes", "25.6k"]).kv_cache_memory_bytes == 25600


def test_bad_flags(capsys):
    for argv in (["--kv-cache-memory", "4.5G"], ["--num-blocks", "1.5"], ["--gpu-memory-utilization", "most"]):
        with pytest.raises(SystemExit):
            parse(argv)
    assert "'4.5G'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="gpu_memory_utilization .* got 1.5"):
        parse(["--gpu-memory-utilization", "1.5"])
    with pytest.raises(ValueError, match="num_blocks must be an int >= 0, got -2"):
        parse(["--num-blocks=-2"])


def test_flag_module_imports_no_torch():
    code = "import sys, impl.entrypoints.cli_args; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
