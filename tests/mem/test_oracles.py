"""The independent oracles of ROAD-V1-MEM: measured values by hand, independence from impl and gates."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from oracles.kv_allocation import PagedLayer, StateLayer, allocated_bytes, marginal_bytes_per_block, page_bytes_of_layer
from oracles.kv_budget import blocks_for_knobs, largest_pool_within
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


def test_size_oracle():
    assert read_size("4GiB", what="x") == 4 * 2**30 and read_size("25.6k", what="x") == 25600
    with pytest.raises(ValueError):
        read_size("4.5G", what="x")


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
