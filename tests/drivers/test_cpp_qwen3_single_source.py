"""The C++ decoder holds no sharding of its own (spec/tensor-parallel.md TP-4.1 to TP-4.6: the shard plan is the one
source of ranges): drivers/cpp's qwen3.cpp composes the tensor-parallel layers of layers/linear.h and
layers/vocab_parallel_embedding.h and reads neither its rank nor the world's size, slices no range, masks no
vocabulary and calls no collective. Read from its source and header, comments and string literals left out."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu

ROOT = Path(__file__).resolve().parents[2]
DECODER = ROOT / "drivers" / "cpp" / "src" / "vllm" / "model_executor" / "models" / "qwen3.cpp"
DECODER_HEADER = ROOT / "drivers" / "cpp" / "include" / "vllm" / "model_executor" / "models" / "qwen3.h"

FORBIDDEN: dict[str, re.Pattern[str]] = {
    "the rank's index": re.compile(r"\.\s*rank\s*\(|\brank\s*\*|\*\s*rank\b"),
    "the world's size": re.compile(r"\b(tp_size|world_size)\s*\(|[/%]\s*tp\b"),
    "the plan's per-rank sizes": re.compile(
        r"\b(RankPiece|ShardSize|ShardWidth|QkvHeadLayout|VocabLayout|PadVocab|kv_shard|heads_per_rank|"
        r"kv_heads_per_rank|kv_replicas|padded_vocab|per_rank|vocab_range|vocab_loaded|RankShards|WeightShard)\b"),
    "a slice of a range": re.compile(r"\b(Span|RowSlice|ColumnSlice|LinearSlice|SplitLastDim|VocabShardOf)\b"),
    "a range's bounds (a vocabulary mask)": re.compile(r"\.\s*(begin|end)\b(?!\s*\()"),
    "a collective": re.compile(r"\b(AllReduce|AllGather|ReduceScatter|Broadcast)\b"),
}
"""What the decoder must leave to the shard plan and the layers -> how it reads in C++."""

LAYERS = ("VocabParallelEmbeddingForward", "QkvParallelForward", "RowParallelForward", "ParallelMlpForward",
          "ParallelLmHeadForward")
"""The layers the decoder composes: embedding, QKV, o_proj, gate/up + down, lm_head."""

LAYER_HEADERS = ("vllm/model_executor/layers/linear.h", "vllm/model_executor/layers/vocab_parallel_embedding.h")

_NOT_CODE = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.DOTALL)


def code_of(source: str) -> str:
    """``source`` with its comments and string and character literals blanked, its lines kept in place."""
    return _NOT_CODE.sub(lambda found: "\n" * found.group().count("\n") + " ", source)


def findings(source: str, name: str = "qwen3.cpp") -> list[str]:
    """Every line of C++ ``source`` holding range arithmetic, as 'NAME:LINE: what: the line'."""
    found = []
    for number, line in enumerate(code_of(source).splitlines(), start=1):
        for what, pattern in FORBIDDEN.items():
            if pattern.search(line):
                found.append(f"{name}:{number}: {what}: {line.strip()}")
    return found


@pytest.mark.parametrize("path", [DECODER, DECODER_HEADER], ids=lambda path: path.name)
def test_the_decoder_holds_no_range_arithmetic(path: Path) -> None:
    assert findings(path.read_text(), path.name) == []


def test_the_decoder_composes_the_tensor_parallel_layers() -> None:
    source = DECODER.read_text()
    included = re.findall(r'^\s*#\s*include\s+"([^"]+)"', source, re.MULTILINE)
    assert [header for header in LAYER_HEADERS if header not in included] == []
    code = code_of(source)
    assert [layer for layer in LAYERS if not re.search(rf"\b{layer}\s*\(", code)] == []


@pytest.mark.parametrize(("what", "line"), [
    # main's decoder before the layers took their ranges from the plan alone: the rank's head counts and the last row
    ("the world's size", "const distributed::QkvHeads heads = distributed::QkvHeadLayout(c.num_heads, c.num_kv_heads, tp.tp_size());"),
    ("the plan's per-rank sizes", "CausalAttention(q, k, *qkv.v, heads.heads_per_rank, heads.kv_heads_per_rank, c.head_dim);"),
    ("a slice of a range", "RowSlice(normed, distributed::Span{static_cast<int>(n) - 1, static_cast<int>(n)});"),
    ("the rank's index", "const int begin = tp.rank() * rows;"),
    ("the rank's index", "Rows(weight, rank * rows, (rank + 1) * rows);"),
    ("the world's size", "const int rows = c.ffn / tp;"),
    ("the world's size", "const bool last = step % tp == 0;"),
    ("a range's bounds (a vocabulary mask)", "if (ids[t] >= range.begin && ids[t] < range.end) rows[t] = shard[ids[t] - range.begin];"),
    ("a collective", "return tp.AllReduce(rows);"),
])
def test_each_kind_of_range_arithmetic_is_found(what: str, line: str) -> None:
    assert [found.split(": ")[1] for found in findings(f"int f() {{\n  {line}\n}}\n")].count(what) == 1


def test_comments_and_string_literals_are_not_code() -> None:
    source = ('// rank * rows, as the plan cuts them; tp.AllReduce(x)\n/* ids >= range.begin\n   / tp */\n'
              'const char* why = "a rank() / tp";\nconst char star = \'*\';\n')
    assert findings(source) == []
    assert code_of(source).count("\n") == source.count("\n")
