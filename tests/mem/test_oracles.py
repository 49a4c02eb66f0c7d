"""The independent oracles of ROAD-V1-MEM: measured values by hand, independence from impl and gates."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

from oracles.kv_allocation import PagedLayer, StateLayer, allocated_bytes, marginal_bytes_per_block, page_bytes_of_layer
from oracles.kv_budget import blocks_for_knobs, largest_pool_within
from oracles import kv_sizes
from oracles.kv_sizes import read_size

pytestmark = pytest.mark.cpu
ROOT = Path(__file__).resolve().parents[2]


def flash(name: str = "l", heads: int = 2, **kw) -> PagedLayer:
    return PagedLayer(name, "flash_attn", 16, heads, 64, kw.pop("head_size_v", 64), kw.pop("storage", torch.float32), **kw)


def test_measured_bytes_match_the_cpp_cases():
    assert marginal_bytes_per_block([flash("a"), flash("b")]) == 32768
    assert marginal_bytes_per_block([PagedLayer("m", "mla", 16, 1, 576, 576, torch.bfloat16)]) == 18432
    state = StateLayer("g", ((3, 1024), (16, 64, 64)), (torch.float32, torch.float32))
    assert marginal_bytes_per_block([flash(), state]) == 16384
    assert page_bytes_of_layer(state) == (3 * 1024 + 16 * 64 * 64) * 4
    assert allocated_bytes([state], 3) == allocated_bytes([state], 300)  # state does not grow with blocks


def test_storage_formats():
    assert page_bytes_of_layer(PagedLayer("m", "mla", 16, 1, 576, 576, torch.uint8, "fp8_ds_mla")) == 16 * 656
    assert page_bytes_of_layer(PagedLayer("n", "flash_attn", 16, 8, 128, 128, torch.uint8, "nvfp4")) == 18432
    assert page_bytes_of_layer(PagedLayer("s", "flash_attn", 16, 8, 128, 128, torch.int8, "per_token_head")) == 33792
    assert page_bytes_of_layer(PagedLayer("t", "flash_attn", 16, 8, 128, 128, torch.uint8, "fp8_per_tensor")) == 32768
    assert page_bytes_of_layer(flash(page_bytes=20000)) == 20000
    with pytest.raises(ValueError, match="cannot hold"):
        page_bytes_of_layer(flash(page_bytes=16383))
    with pytest.raises(ValueError, match="multiples of 16"):
        page_bytes_of_layer(PagedLayer("n", "flash_attn", 16, 1, 100, 100, torch.uint8, "nvfp4"))
    with pytest.raises(ValueError, match="backend"):
        PagedLayer("x", "paged", 16, 1, 64, 64, torch.float32)


def test_budget_search_is_the_floor():
    layers = [flash()]
    assert largest_pool_within(layers, 16384 * 100 + 1) == 100
    assert largest_pool_within(layers, 16383) == 0
    assert blocks_for_knobs(num_blocks=0, kv_cache_memory_bytes=16384 * 7, layers=layers, available_kv_cache_memory=None) == 7
    assert blocks_for_knobs(num_blocks=3, kv_cache_memory_bytes=1, layers=layers, available_kv_cache_memory=None) == 3
    assert blocks_for_knobs(num_blocks=0, kv_cache_memory_bytes=0, layers=layers, available_kv_cache_memory=None) == 256
    with pytest.raises(ValueError):
        blocks_for_knobs(num_blocks=0, kv_cache_memory_bytes=0, layers=layers, available_kv_cache_memory=0)
    with pytest.raises(ValueError, match="nothing per block"):
        largest_pool_within([StateLayer("g", ((4,),), (torch.float32,))], 10**6)


SIZES_READ = {  # text: bytes, worked out by hand
    "4294967296": 4294967296, "0": 0, "007": 7, "4GiB": 4 * 2**30, "4 GiB": 4 * 2**30, "4G": 4 * 2**30,
    "4g": 4 * 10**9, "4GB": 4 * 10**9, "4  GB": 4 * 10**9, "25.6k": 25600, "1.5GB": 1_500_000_000,
    "512KiB": 524288, "1TiB": 2**40, "2T": 2 * 2**40, "3t": 3 * 10**12, "7m": 7 * 10**6, "7M": 7 * 2**20,
    "7MB": 7 * 10**6, "7MiB": 7 * 2**20, "1K": 1024, "1KB": 1000, "1k": 1000, " 16M ": 16 * 2**20,
    "\t4k\n": 4000, "\u30004 GB\u00a0": 4 * 10**9, "0.5k": 500, "1.0005m": 1_000_500, "0.000001m": 1,
    "3.0k": 3000, "1.250KB": 1250, "0.0KB": 0, "00.5k": 500,
}
SIZES_REFUSED = [  # text: refused, each for a reason MEM-1.9/MEM-1.10 names
    "", " ", "4.5G", "1.5GiB", "4.0G", "0.5K", "1.0005k", "0.0000001m", "3.0", "4gb", "4GIB", "4gib", "4Gib", "4kB",
    "4B", "4 B", "4b", "4Ki", "4iB", "4PiB", "-1", "+4", "\u22124k", "1e9", "1E3k", "1_000", "4_GiB", "\uff14GiB",
    "\u0664", "\u00b2", "4.", ".5k", "4..5k", "1.2.3k", "4,5k", "4\tGB", "4\u00a0GB", "4\u3000GiB", "4-GB",
    "4GG", "4GiBGiB", "4 k k", "4kG", "GiB", "GiB4", "4 096", "0x10", "4 GiB B", "4 bytes",
]


@pytest.mark.parametrize(("text", "size"), SIZES_READ.items(), ids=repr)
def test_size_oracle_reads(text, size):
    assert read_size(text, what="--kv-cache-memory") == size


@pytest.mark.parametrize("text", SIZES_REFUSED, ids=repr)
def test_size_oracle_refuses_quoting_the_text(text):
    with pytest.raises(ValueError, match=re.escape(repr(text))):
        read_size(text, what="--kv-cache-memory")


def test_size_oracle_refuses_non_text():
    for value in (4, 4.0, b"4G", None):
        with pytest.raises(TypeError):
            read_size(value, what="--kv-cache-memory")


def test_size_oracle_units_are_the_sixteen_spellings():
    assert {spelling: unit.scale for spelling, unit in kv_sizes.SPELLINGS.items()} == {
        "": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
        "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def test_size_oracle_trims_exactly_what_str_strip_trims():
    """Whitespace at either end is dropped in Unicode's sense (as ``str.strip``), inside only U+0020 separates."""
    for code in range(0x3001):
        char = chr(code)
        if char.isspace():
            assert read_size(f"{char}4k{char}", what="x") == 4000
            if char != " ":
                with pytest.raises(ValueError):
                    read_size(f"4{char}k", what="x")


def test_size_oracle_huge_inexact_sizes_are_value_errors():
    """Far past float range a non-whole size is still a ValueError quoting the text (no float in the way)."""
    text = "2" + "0" * 305 + ".0005k"
    with pytest.raises(ValueError, match="not a whole number of bytes"):
        read_size(text, what="x")
    assert read_size("2" + "0" * 305 + ".5k", what="x") == 2 * 10**308 + 500


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("path", sorted(ROOT.glob("oracles/kv_*.py")) + [
    ROOT / "impl/v1/kv_cache_interface.py", ROOT / "impl/v1/field_checks.py",
    *sorted((ROOT / "impl/entrypoints").glob("[!e]*.py"))], ids=lambda p: str(p.relative_to(ROOT)))
def test_impl_and_oracles_stay_independent(path):
    """impl imports only impl, oracles only oracles, of the project's packages (the stdlib is not checked)."""
    own = path.relative_to(ROOT).parts[0]
    imported = {name for name in _imports(path) if name in ("impl", "oracles", "gates")}
    assert imported <= {own}, f"{path.name} imports {imported - {own}}"
