"""The C++ port's tensor-parallel layers take their ranges from the shard plan alone (spec/tensor-parallel.md TP-4.1
to TP-4.6): drivers/cpp's layers/linear.cpp, vocab_parallel_embedding.cpp and sharded_weight.cpp load the shards
that vllm/distributed/shard_plan.h's per-layer functions name, and compute no block of their own (no rank times a
width, no size over tp, none of the plan's layout functions). Read from their source, comments and string literals
left out."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu

LAYERS = Path(__file__).resolve().parents[2] / "drivers" / "cpp" / "src" / "vllm" / "model_executor" / "layers"
SOURCES = ("linear.cpp", "vocab_parallel_embedding.cpp", "sharded_weight.cpp")

RANGE_ARITHMETIC = re.compile(
    r"\brank_?\s*\*|\*\s*rank_?\b|[/%]\s*(tp|tp_|tp_size\s*\(\s*\))(?!\w)"
    r"|\b(RankPiece|QkvHeadLayout|VocabLayout|PadVocab|kv_shard|heads_per_rank|kv_heads_per_rank|kv_replicas|"
    r"per_rank|padded_vocab)\b")
"""A block computed in place of the plan's: the rank's index scaled, a size split tp ways, the plan's layout."""

_NOT_CODE = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"", re.DOTALL)


def range_arithmetic(source: str) -> list[str]:
    """The lines of C++ ``source`` (comments and strings blanked) that compute a range, as 'LINE: the line'."""
    code = _NOT_CODE.sub(lambda found: "\n" * found.group().count("\n"), source)
    return [f"{number}: {line.strip()}" for number, line in enumerate(code.splitlines(), start=1)
            if RANGE_ARITHMETIC.search(line)]


@pytest.mark.parametrize("name", SOURCES)
def test_the_layers_compute_no_range_of_their_own(name: str) -> None:
    assert range_arithmetic((LAYERS / name).read_text()) == []


@pytest.mark.parametrize("line", [
    # main's layers before they loaded the plan's shards
    "return vd::RankPiece(tp.rank(), ShardWidth(name, size, tp.tp_size()));",
    "const vd::QkvHeads heads = vd::QkvHeadLayout(g.num_heads, g.num_kv_heads, tp.tp_size());",
    "const vd::Span range = Layout(tp, weight).range(tp.rank()); vd::VocabLayout(n, tp);",
    "shard.shape[0] = vocab.per_rank;",
    "const int begin = rank * rows;",
    "const int rows = out / tp;",
    "const int rows = out / tp.tp_size();",
])
def test_each_kind_of_range_arithmetic_is_found(line: str) -> None:
    assert range_arithmetic(f"int f() {{\n  {line}\n}}\n") == [f"2: {line}"]


def test_comments_and_strings_are_not_code() -> None:
    assert range_arithmetic('// rank * rows / tp\nconst char* why = "RankPiece(rank, out / tp)";\n') == []
