"""One source of truth for the TP ranges (spec/tensor-parallel.md TP-4.1 to TP-4.7): impl/distributed/shard_plan.py
computes which rows and columns a rank holds; the layer classes get their ranges from its functions, and the decoder
(qwen3.py) composes the layer classes, holding no range arithmetic, no collective and no vocabulary mask of its own.
Read off the modules' syntax trees."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from impl.distributed import shard_plan

ROOT = Path(__file__).resolve().parents[2]
DECODER = ROOT / "impl/model_executor/models/qwen3.py"
LAYERS = [ROOT / "impl/model_executor/layers/linear.py", ROOT / "impl/model_executor/layers/vocab_parallel_embedding.py"]

SHARD_NAMES = {"rank", "tp", "world_size", "tp_size", "tp_rank", "kv_shard", "replicas", "kv_replicas", "per_rank"}
"""Names whose arithmetic or comparison is range arithmetic."""

MASK_NAMES = {"ids", "vocab_loaded", "vocab_range", "loaded_end", "start", "end"}
"""Names a comparison of which is a vocabulary mask (the embedding's to make)."""

PLAN_TYPES = {"HeadLayout", "ModelGeometry", "ShardPlan", "RankShards", "WeightShard", "WeightPart", "Span"}
"""What the decoder may import from the shard plan: its types, none of its functions."""

SHARD_FUNCTIONS = {"block", "column_shard", "row_shard", "merged_column_shard", "qkv_shard", "head_layout",
                   "vocab_ranges", "vocab_shard"}
"""The shard plan's per-layer functions, which the layer classes call for their ranges."""


def _names(node: ast.AST) -> set[str]:
    """Every variable or attribute name read inside ``node``."""
    found = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name):
            found.add(inner.id)
        elif isinstance(inner, ast.Attribute):
            found.add(inner.attr)
    return found


def range_arithmetic(tree: ast.AST) -> list[str]:
    """Each arithmetic operation or comparison on a rank, tp or shard count, as ``line: source``."""
    found = []
    for node in ast.walk(tree):
        operands: list[ast.AST] = []
        if isinstance(node, ast.BinOp):
            operands = [node.left, node.right]
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.AugAssign):
            operands = [node.target, node.value]
        if any(_names(operand) & SHARD_NAMES for operand in operands):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def vocab_masks(tree: ast.AST) -> list[str]:
    """Each comparison of token ids or vocabulary ranges, as ``line: source``."""
    return [f"{node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree)
            if isinstance(node, ast.Compare) and _names(node) & MASK_NAMES]


def decoder_imports(tree: ast.AST) -> list[str]:
    """Each import the decoder must not make: a shard plan function, or the collectives (the layers run them)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "impl.distributed.shard_plan":
            found += [f"{node.lineno}: {alias.name}" for alias in node.names if alias.name not in PLAN_TYPES]
        elif isinstance(node, ast.ImportFrom) and node.module == "impl.distributed":
            found += [f"{node.lineno}: {alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: {alias.name}" for alias in node.names if alias.name.startswith("torch.distributed")]
    return found


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_the_decoder_has_no_range_arithmetic_and_imports_no_shard_function_or_collective():
    tree = _tree(DECODER)
    assert range_arithmetic(tree) == []
    assert vocab_masks(tree) == []
    assert decoder_imports(tree) == []
    used = _names(tree)
    for layer in ("VocabParallelEmbedding", "QKVParallelLinear", "RowParallelLinear", "ParallelMLP", "ParallelLMHead"):
        assert layer in used, f"qwen3.py does not compose {layer}"


@pytest.mark.parametrize("path", LAYERS, ids=lambda path: path.name)
def test_the_layer_modules_take_their_ranges_from_the_shard_plan(path: Path):
    tree = _tree(path)
    assert range_arithmetic(tree) == []
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module == "impl.distributed.shard_plan" for alias in node.names}
    assert imported & SHARD_FUNCTIONS, f"{path.name} imports none of the shard plan's functions"
    assert not imported & {"divide", "kv_layout", "pad_vocab", "VOCAB_PADDING"}, imported


def test_the_shard_functions_named_here_are_the_plans():
    assert all(callable(getattr(shard_plan, name)) for name in SHARD_FUNCTIONS)


@pytest.mark.parametrize(("source", "found"), [
    ("start = rank * per_rank", ["1: rank * per_rank"]),
    ("rows = slice(kv_shard * size, (kv_shard + 1) * size)", ["1: kv_shard * size", "1: (kv_shard + 1) * size",
                                                             "1: kv_shard + 1"]),
    ("n = communication_op.world_size() * kv_heads // heads", ["1: communication_op.world_size() * kv_heads // heads",
                                                               "1: communication_op.world_size() * kv_heads"]),
    ("x = hidden + attended", []),
])
def test_the_check_names_range_arithmetic(source: str, found: list[str]):
    assert sorted(range_arithmetic(ast.parse(source))) == sorted(found)


def test_the_check_names_a_vocabulary_mask():
    source = "inside = (ids >= start) & (ids < model.vocab_loaded[1])\nbest = logits > 0"
    assert vocab_masks(ast.parse(source)) == ["1: ids >= start", "1: ids < model.vocab_loaded[1]"]


def test_the_check_refuses_a_decoder_that_shards_or_reduces_itself():
    source = ("from impl.distributed import communication_op\n"
              "from impl.distributed.shard_plan import RankShards, WeightShard, shard_plan\n")
    assert decoder_imports(ast.parse(source)) == ["1: communication_op", "2: shard_plan"]
