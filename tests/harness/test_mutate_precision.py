"""The precision family of `gates mutate` (docs/mutation.md, "The precision family"; docs/mutation-cpp.md): dtype
casts dropped with the receiver kept, `dtype=` arguments dropped, float dtypes narrowed, in Python; `static_cast`s
to float or double dropped and local `double`s narrowed to `float`, in C++; none where the code is no dtype cast; a
file the operators cannot read is an error naming file:line; the family in the report and `--family`."""
from __future__ import annotations

import json

import pytest

from _vllm_gates.mutation.mutate_cpp import cpp_mutants
from _vllm_gates.mutation.mutate_operators import FAMILIES, family, mutants
from _vllm_gates.mutation.mutate_report import MutationRowReport, summary_lines

from .conftest import Example

IMPL = "example_row/impl.py"
GATE = "gates/rows/example/gate.yaml"


def python_changes(*statements: str) -> set[tuple[str, str, str]]:
    """Each precision mutant of a function made of ``statements`` as (operator, line removed, line added), stripped."""
    text = "import numpy as np\nimport torch\n\n\ndef f(x, w, d, device, other):\n" + "".join(
        f"    {s}\n" for s in statements)
    return {_change(m.operator, m.diff) for m in mutants("m.py", text) if m.operator.startswith("precision")}


def cpp_changes(*statements: str) -> set[tuple[str, str, str]]:
    text = "float f(float x, double y, const float* row) {\n" + "".join(f"  {s}\n" for s in statements) + "}\n"
    return {_change(m.operator, m.diff) for m in cpp_mutants("f.cpp", text) if m.operator.startswith("precision")}


def _change(operator: str, diff: str) -> tuple[str, str, str]:
    lines = diff.splitlines()[3:]
    removed = " ".join(l[1:].strip() for l in lines if l.startswith("-"))
    added = " ".join(l[1:].strip() for l in lines if l.startswith("+"))
    return operator, removed, added


@pytest.mark.parametrize("statement, operator, mutated", [
    ("y = x.to(torch.float32)", "precision drop .to()", "y = x"),
    ("y = x.to(w.dtype) * w", "precision drop .to()", "y = x * w"),
    ("y = x.to(in_dtype)", "precision drop .to()", "y = x"),
    ("y = x.to(dtype=torch.bfloat16)", "precision drop .to()", "y = x"),
    ("y = x.to(torch.float32, non_blocking=True)", "precision drop .to()", "y = x"),
    ("y = x.to('float32')", "precision drop .to()", "y = x"),
    ("y = (x + w).float() * 2", "precision drop .float()", "y = (x + w) * 2"),
    ("y = x.half()", "precision drop .half()", "y = x"),
    ("y = x.bfloat16()", "precision drop .bfloat16()", "y = x"),
    ("y = x.double().sum()", "precision drop .double()", "y = x.sum()"),
    ("y = np.asarray(x).astype(np.float32)", "precision drop .astype()", "y = np.asarray(x)"),
    ("y = x.type(torch.float64)", "precision drop .type()", "y = x"),
    ("y = torch.zeros(3, dtype=torch.float64)", "precision drop dtype=", "y = torch.zeros(3)"),
    ("y = torch.zeros(dtype=torch.float64, size=(3,))", "precision drop dtype=", "y = torch.zeros(size=(3,))"),
    ("y = np.zeros(3, dtype=np.double,)", "precision drop dtype=", "y = np.zeros(3,)"),
    ("y = torch.ones(4, device=device, dtype=w.dtype)", "precision drop dtype=", "y = torch.ones(4, device=device)"),
    ("y = x.to(device=device, dtype=torch.float32)", "precision drop dtype=", "y = x.to(device=device)"),
    ("y = torch.zeros(3, dtype=torch.float64)", "precision float64 -> float32", "y = torch.zeros(3, dtype=torch.float32)"),
    ("y = x.to(torch.double)", "precision double -> float32", "y = x.to(torch.float32)"),
    ("y = x.to(torch.float32)", "precision float32 -> float16", "y = x.to(torch.float16)"),
    ("y = x.to(torch.float32)", "precision float32 -> bfloat16", "y = x.to(torch.bfloat16)"),
    ("y = x.to(torch.float)", "precision float -> bfloat16", "y = x.to(torch.bfloat16)"),
    ("y = torch.zeros(2, dtype=torch.complex128)", "precision complex128 -> complex64", "y = torch.zeros(2, dtype=torch.complex64)"),
    ("y = np.float64(x)", "precision float64 -> float32", "y = np.float32(x)"),
    ("y = np.asarray(x, dtype=np.float32)", "precision float32 -> float16", "y = np.asarray(x, dtype=np.float16)"),
    ("y = np.asarray(x, dtype='float64')", "precision float64 -> float32", "y = np.asarray(x, dtype='float32')"),
    ('y = x.astype("float32")', "precision float32 -> float16", 'y = x.astype("float16")'),
])
def test_each_python_precision_operator(statement: str, operator: str, mutated: str) -> None:
    assert (operator, statement, mutated) in python_changes(statement)


@pytest.mark.parametrize("statement", [
    "y = x.to(device)",  # a device move, not a cast
    "y = x.to('cuda')",
    "y = x.to(w.device)",
    "y = x.to(other)",  # a tensor's dtype and device: not told from the text
    "y = x.float(3)",  # not the argument-less cast
    "y = float(x)",  # Python's float, not a tensor's
    "y = torch.zeros(3, dtype=None)",  # dropping it changes nothing
    "y = {'float32': 4}['float32']",  # a text that is no dtype argument
])
def test_no_python_precision_mutant_where_there_is_no_cast(statement: str) -> None:
    assert python_changes(statement) == set()


@pytest.mark.parametrize("statement", [
    "y = x.to(torch.float16)",  # no narrower float for these
    "y = x.to(torch.bfloat16)",
    "y = np.asarray(x, dtype=np.float16)",
    "y = x.to(torch.int64)",  # integers are not narrowed
])
def test_no_narrower_dtype_for_half_floats_and_integers(statement: str) -> None:
    assert not [op for op, _, _ in python_changes(statement) if "->" in op]


def test_a_to_with_only_a_dtype_keyword_is_dropped_whole_not_emptied() -> None:
    assert {op for op, _, _ in python_changes("y = x.to(dtype=torch.bfloat16)")} == {"precision drop .to()"}


def test_a_to_that_moves_a_device_too_is_kept_its_dtype_narrowed() -> None:
    assert {op for op, _, _ in python_changes("y = x.to(device, torch.float32)")} == {
        "precision float32 -> float16", "precision float32 -> bfloat16"}


def test_annotations_and_defaults_of_dtypes() -> None:
    text = ("import torch\n\n\ndef f(x: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:\n"
            "    y: torch.float32 = x\n    return y\n")
    found = [m for m in mutants("m.py", text) if m.operator.startswith("precision")]
    assert [(m.line, m.operator) for m in found] == [(4, "precision float64 -> float32")]  # the default, not annotations


def test_python_precision_mutants_compile_and_keep_their_fingerprint_when_moved() -> None:
    text = "import torch\n\n\ndef f(x, w):\n    return (x.to(torch.float32) * w.float()).to(x.dtype)\n"
    found = [m for m in mutants("m.py", text) if m.operator.startswith("precision")]
    assert {m.operator for m in found} == {"precision drop .to()", "precision drop .float()",
                                          "precision float32 -> float16", "precision float32 -> bfloat16"}
    assert len(found) == 5 and all(compile(m.source, "m.py", "exec") for m in found)
    assert "    return (x * w.float()).to(x.dtype)\n" in {m.source.splitlines(keepends=True)[-1] for m in found}
    assert "    return (x.to(torch.float32) * w.float())\n" in {m.source.splitlines(keepends=True)[-1] for m in found}
    moved = [m for m in mutants("m.py", "\n\n" + text) if m.operator.startswith("precision")]
    assert [m.fingerprint for m in moved] == [m.fingerprint for m in found]


@pytest.mark.parametrize("statement, operator, mutated", [
    ("return static_cast<float>(y * 2.0);", "precision drop static_cast<float>", "return (y * 2.0);"),
    ("double s = static_cast<double>(x) * x;", "precision drop static_cast<double>", "double s = (x) * x;"),
    ("double acc = 0.0;", "precision double -> float", "float acc = 0.0;"),
    ("const double scale = 1.0 / y;", "precision double -> float", "const float scale = 1.0 / y;"),
    ("double total{0.0};", "precision double -> float", "float total{0.0};"),
    ("for (double t = 0; t < y; t += 1) x += t;", "precision double -> float", "for (float t = 0; t < y; t += 1) x += t;"),
])
def test_each_cpp_precision_operator(statement: str, operator: str, mutated: str) -> None:
    assert (operator, statement, mutated) in cpp_changes(statement)


@pytest.mark.parametrize("statement", [
    "return static_cast<int>(y);",  # not a float type
    "return static_cast<std::size_t>(x);",
    "float acc = 0.0f;",  # the port has no narrower type than float (float16/bfloat16 are rounded floats)
    "long double wide = y;",  # not a plain double
    "std::vector<double> values;",  # a template argument
    "auto g = [](double v) { return v; };",  # a parameter
    "// double hidden = 0.0; static_cast<float>(y)",  # a comment
    'const char* name = "double d = static_cast<float>(y);";',  # a literal
])
def test_no_cpp_precision_mutant_where_there_is_no_cast_or_local_double(statement: str) -> None:
    assert cpp_changes(statement) == set()


def test_cpp_parameters_and_return_types_are_not_narrowed() -> None:
    text = "double Mean(double a, double b) {\n  return (a + b) / 2.0;\n}\n"
    assert not [m for m in cpp_mutants("f.cpp", text) if m.operator.startswith("precision")]


def test_a_file_the_operators_cannot_read_is_an_error_naming_file_and_line() -> None:
    with pytest.raises(SyntaxError) as python:
        mutants("impl/m.py", "import torch\n\n\ndef f(x):\n    return x.to(torch.float32\n")
    assert (python.value.filename, python.value.lineno) == ("impl/m.py", 5)
    with pytest.raises(SyntaxError) as cpp:
        cpp_mutants("src/m.cpp", "float f(double y) {\n  float s = 0;\n  return static_cast<float(y);\n}\n")
    assert (cpp.value.filename, cpp.value.lineno) == ("src/m.cpp", 3) and "static_cast" in cpp.value.msg


def test_the_family_of_each_operator_and_its_counts_in_the_report() -> None:
    assert FAMILIES == ("arithmetic", "comparison", "boolean", "constant", "condition", "statement", "index", "precision")
    assert [family(o) for o in ("arith + -> -", "compare < -> <=", "boolean drop not", "constant +1", "negate condition",
                                "drop statement", "return None", "return {}", "index -1", "precision drop .to()",
                                "precision drop static_cast<float>")] == [
        "arithmetic", "comparison", "boolean", "constant", "condition", "statement", "statement", "statement", "index",
        "precision", "precision"]
    report = MutationRowReport("ROW", "s", "g", ["gate-a"], mutants=[
        {"operator": "precision drop .to()", "status": "killed", "killing_gates": ["gate-a"]},
        {"operator": "precision float32 -> float16", "status": "survived", "killing_gates": []},
        {"operator": "arith + -> -", "status": "killed", "killing_gates": ["gate-a"]}])
    families = report.to_json()["families"]
    assert (families["precision"]["killed"], families["precision"]["survived"], families["arithmetic"]["killed"]) == (1, 1, 1)
    lines = summary_lines(report, 1.0)
    assert "  family precision: 2 mutants, killed 1, survived 1" in lines
    assert "  family arithmetic: 1 mutants, killed 1" in lines


PRECISE = ("    return 2 * block_size * heads * head_size * dtype_bytes",
           "    page = 2 * block_size * heads * head_size * dtype_bytes\n"
           "    return int(np.asarray(page + 4096, dtype=np.float32)) - 4096  # float16 spaces 4096.. by 4")


def test_gates_mutate_family_precision_judges_only_precision_mutants(example: Example) -> None:
    example.edit(*PRECISE, IMPL)
    example.edit('"""Toy impl: bytes of one KV page by formula (EX-1.1, EX-1.2)."""',
                 '"""Toy impl: bytes of one KV page by formula (EX-1.1, EX-1.2)."""\nimport numpy as np', IMPL)
    # a named case whose page is 2 mod 4 (every size odd): float16 rounds 4096 + 6 away, whatever the properties draw
    example.edit("      negative-heads:", "      odd-sizes:\n        input: {block_size: 1, heads: 1, head_size: 3, "
                 "dtype_bytes: 1}\n        expect: 6\n      negative-heads:", GATE)
    result = example.gates("mutate", "--family", "precision", "--json", "out/m.json")
    report = json.loads((example.root / "out" / "m.json").read_text(encoding="utf-8"))
    row = report["rows"][0]
    by_operator = {m["operator"]: m for m in row["mutants"]}
    assert result.code == 0 and report["families"] == ["precision"], result.text
    assert set(by_operator) == {"precision drop dtype=", "precision float32 -> float16"}
    assert by_operator["precision float32 -> float16"]["status"] == "killed"  # 4098 is 4096 in float16
    assert by_operator["precision drop dtype="]["status"] == "survived"  # int64 holds the page exactly
    line = example.line("dtype=np.float32", relative=IMPL)
    assert f"SURVIVED {IMPL}:{line} (precision drop dtype=), passed by: page-bytes" in result.out
    assert "+    return int(np.asarray(page + 4096)) - 4096" in result.out
    assert "  family precision: 2 mutants, killed 1, survived 1" in result.out
    assert row["families"] == {"precision": {**dict.fromkeys(row["families"]["precision"], 0), "killed": 1, "survived": 1}}


def test_gates_mutate_refuses_an_unknown_family_and_a_file_that_does_not_parse(example: Example) -> None:
    unknown = example.gates("mutate", "--family", "precison")
    assert unknown.code == 2 and "--family precison: unknown operator family (known: arithmetic" in unknown.err
    example.edit("    return 2 * block_size", "    return (2 * block_size", IMPL)
    broken = example.gates("mutate", "--family", "precision")
    line = example.line("return (2 * block_size", relative=IMPL)
    assert broken.code == 3 and f"row EXAMPLE-ROW: {IMPL}:{line}: does not parse" in broken.err, broken.err
