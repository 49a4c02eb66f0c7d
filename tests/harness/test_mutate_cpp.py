"""C++ mutants for `gates mutate --impl cpp` (issue 28 item 6): the operator families on C++ text, the contexts they
leave alone, the files and gates a row's mutants belong to, and the build cache (docs/mutation.md)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from _vllm_gates.definitions.config import load_config
from _vllm_gates.definitions.implementations import Implementation
from _vllm_gates.definitions.project import load_project
from _vllm_gates.mutation.mutate_cpp import cpp_mutants
from _vllm_gates.mutation.mutate_cpp_build import MutantBuilds, MutantDoesNotBuild
from _vllm_gates.mutation.mutate_cpp_files import cpp_files_for_row, gates_reaching
from _vllm_gates.mutation.mutate_operators import Mutant

ROOT = Path(__file__).resolve().parents[2]


def changes(text: str) -> set[tuple[str, str, str]]:
    """Each mutant as (operator, the line it removes, the line it adds), stripped."""
    found = set()
    for m in cpp_mutants("f.cpp", text):
        lines = m.diff.splitlines()[3:]
        removed = [l[1:].strip() for l in lines if l.startswith("-")]
        added = [l[1:].strip() for l in lines if l.startswith("+")]
        found.add((m.operator, removed[0], added[0] if added else ""))
    return found


def body(*statements: str) -> str:
    return "int f(int a, int b, int* p, bool c) {\n" + "".join(f"  {s}\n" for s in statements) + "}\n"


@pytest.mark.parametrize("statement, operator, mutated", [
    ("return a + b;", "arith + -> -", "return a - b;"),
    ("return a - b;", "arith - -> +", "return a + b;"),
    ("return a * b;", "arith * -> /", "return a / b;"),
    ("return a / b;", "arith / -> *", "return a * b;"),
    ("return a % b;", "arith % -> /", "return a / b;"),
    ("a += b;", "arith += -> -=", "a -= b;"),
    ("a *= b;", "arith *= -> /=", "a /= b;"),
    ("return 1u << b;", "arith << -> >>", "return 1u >> b;"),
    ("return a < b;", "compare < -> <=", "return a <= b;"),
    ("return a <= b;", "compare <= -> <", "return a < b;"),
    ("return a > b;", "compare > -> >=", "return a >= b;"),
    ("return a >= b;", "compare >= -> >", "return a > b;"),
    ("return a == b;", "compare == -> !=", "return a != b;"),
    ("return a != b;", "compare != -> ==", "return a == b;"),
    ("return c && a;", "boolean && -> ||", "return c || a;"),
    ("return c || a;", "boolean || -> &&", "return c && a;"),
    ("return !c;", "boolean drop !", "return c;"),
    ("c = true;", "constant not", "c = false;"),
    ("return a + 7u;", "constant +1", "return a + 8u;"),
    ("return a + 7ULL;", "constant -1", "return a + 6ULL;"),
    ("return a + 7;", "constant 0", "return a + 0;"),
    ("return a + 0x1F;", "constant +1", "return a + 0x20;"),
    ("return a * 1.5f;", "constant -1", "return a * 0.5f;"),
    ("return a * 2.5;", "constant 0", "return a * 0.0;"),
    ("if (a < b) return a;", "negate condition", "if (!(a < b)) return a;"),
    ("while (c) a++;", "negate condition", "while (!(c)) a++;"),
    ("p[a] = b;", "index +1", "p[(a) + 1] = b;"),
    ("p[a] = b;", "index -1", "p[(a) - 1] = b;"),
    ("a = g(b);", "drop statement", ";"),
    ("++a;", "drop statement", ";"),
    ("*p = a;", "drop statement", ";"),
    ("throw std::runtime_error(\"no\");", "drop statement", ";"),
    ("return a;", "return {}", "return {};"),
])
def test_each_family_mutates_its_operator(statement: str, operator: str, mutated: str) -> None:
    assert (operator, statement, mutated) in changes(body(statement))


def test_constants_never_go_negative_and_keep_their_suffix() -> None:
    found = {added for op, _, added in changes(body("return a + 0u;")) if op.startswith("constant")}
    assert found == {"return a + 1u;"}


def test_return_value_is_dropped_only_where_a_default_value_compiles() -> None:
    text = ("auto g() { return 1; }\n"
            "const std::string& h() { return s; }\n"
            "int k() { auto l = []() { return 2; }; auto m = []() -> int { return 3; }; return l() + m(); }\n")
    dropped = {removed for op, removed, _ in changes(text) if op == "return {}"}
    assert dropped == {"int k() { auto l = []() { return 2; }; auto m = []() -> int { return 3; }; return l() + m(); }"}
    assert sum(1 for m in cpp_mutants("f.cpp", text) if m.operator == "return {}") == 2  # `return 3;` and the last


SKIPPED = """#include <vector>
#define LIMIT (1 + 2 < 3)
// a < b + 1 in a comment
/* a == b */
struct A { int v; };
bool operator<(const A& x, const A& y);
int f(std::vector<int>& items, const A* a, std::ostream& out) {
  std::vector<std::vector<int>> nested;
  std::array<A, 3> three;
  std::map<A, std::vector<A>> table;
  std::string text; text += 'x';
  const char* s = "a + b < 2";
  auto raw = R"x(a * b == 3)x";
  char q = '+';
  int* p = nullptr;
  if (p) *p = 2;
  const A& r = *a;
  A&& moved = A{};
  out << s << items.size();
  static_assert(sizeof(int) == 4, "int");
  switch (a->v) { case 3: break; }
  return static_cast<int>(r.v) + std::numeric_limits<int>::max();
}
"""


def test_comments_literals_directives_templates_and_declarators_are_left_alone() -> None:
    found = changes(SKIPPED)
    touched = {removed for _, removed, _ in found}
    for line in ["#include <vector>", "#define LIMIT (1 + 2 < 3)", "// a < b + 1 in a comment", "/* a == b */",
                 "bool operator<(const A& x, const A& y);", "std::vector<std::vector<int>> nested;",
                 "std::array<A, 3> three;", "std::map<A, std::vector<A>> table;",
                 "char q = '+';", "int* p = nullptr;", "const A& r = *a;", "A&& moved = A{};",
                 'static_assert(sizeof(int) == 4, "int");', "switch (a->v) { case 3: break; }"]:
        assert line not in touched, (line, [f for f in found if f[1] == line])
    assert {op for op, removed, _ in found if removed.startswith("out <<")} == {"drop statement"}  # no `>>` swap
    assert {op for op, removed, _ in found if removed.startswith(("const char* s", "auto raw"))} == set()
    assert {op for op, removed, _ in found if removed == "if (p) *p = 2;"} == {
        "negate condition", "drop statement", "constant +1", "constant -1", "constant 0"}  # `*p` is no product
    assert {op for op, removed, _ in found if removed.startswith("std::string text")} == {"drop statement"}
    last = {(op, added) for op, removed, added in found if removed.startswith("return static_cast")}
    assert ("arith + -> -", "return static_cast<int>(r.v) - std::numeric_limits<int>::max();") in last
    assert all("static_cast<=" not in added and "limits<=" not in added for _, added in last)


def test_order_is_deterministic_and_without_duplicates() -> None:
    text = body("a = a + 1;", "if (a < b && c) return a;", "return p[a] + 2;")
    first, second = cpp_mutants("f.cpp", text), cpp_mutants("f.cpp", text)
    assert first == second
    assert [m.line for m in first] == sorted(m.line for m in first)
    assert len({m.source for m in first}) == len(first)
    assert [(m.line, m.operator, m.index) for m in first].count((2, "arith + -> -", 0)) == 1


def test_only_the_lines_asked_for() -> None:
    text = body("a = a + 1;", "return a - b;")
    assert {m.line for m in cpp_mutants("f.cpp", text, {3})} == {3}
    assert cpp_mutants("f.cpp", text, set()) == []


def test_fingerprints_survive_edits_elsewhere_in_the_file() -> None:
    text = body("a = a + 1;", "return a - b;")
    edited = "// a new comment\nint other(int x) { return x * 3; }\n\n" + text
    before = {(m.operator, m.index): m for m in cpp_mutants("f.cpp", text)}
    after = {(m.operator, m.index): m for m in cpp_mutants("f.cpp", edited) if m.line > 3}
    assert before.keys() <= after.keys()
    for key, mutant in before.items():
        assert after[key].fingerprint == mutant.fingerprint
        assert after[key].line == mutant.line + 3
    elsewhere = cpp_mutants("g.cpp", text)[0]
    assert elsewhere.fingerprint != cpp_mutants("f.cpp", text)[0].fingerprint  # the file is part of it


def test_a_rows_files_are_its_operations_code_without_the_driver() -> None:
    config = load_config(ROOT)
    project = load_project(config)
    mem = project.gate_file("ROAD-V1-MEM")
    files = cpp_files_for_row(config, mem)
    assert "drivers/cpp/src/ops/mem_kv.cpp" in files  # registers kv-bytes-per-block
    assert "drivers/cpp/src/vllm/v1/kv_bytes_per_block.cpp" in files  # the port code it calls
    assert not [f for f in files if "/driver/" in f or "/tp_" in f or "/capi_" in f]
    reaching = gates_reaching(config, mem, "drivers/cpp/src/ops/mem_kv.cpp")
    kv = {g.id for g in mem.gates if g.operation in ("kv-bytes-per-block", "page-size-bytes")}
    assert set(reaching) == kv and reaching
    assert gates_reaching(config, mem, "drivers/cpp/src/driver/server.cpp") == []


def test_reach_follows_a_shared_header_not_a_same_named_helper(tmp_path: Path) -> None:
    from _vllm_gates.mutation.mutate_cpp_files import CppPort, _read
    texts = {
        "ops/a_ops.cpp": '#include "lib/a.h"\n#include "common_a.h"\nGATES_OPERATION("op-a", [](const V& v) { return Helper(Compute(v)); });\n',
        "ops/common_a.h": "int Helper(int);\n",
        "ops/common_a.cpp": '#include "common_a.h"\nint Helper(int x) { return x; }\n',
        "ops/common_b.h": "int Helper(int);\n",
        "ops/common_b.cpp": '#include "common_b.h"\nint Helper(int x) { return x + 1; }\n',
        "include/lib/a.h": "int Compute(int);\n",
        "src/lib/a.cpp": '#include "lib/a.h"\nint Compute(int v) { return v * 2; }\n',
        "driver/main.cpp": "int main() { return 0; }\n",
    }
    port = CppPort({p: _read(p, t, texts) for p, t in texts.items()})
    row = SimpleNamespace(gates=[SimpleNamespace(id="G1", operation="op-a"), SimpleNamespace(id="G2", operation=None)])
    assert port.files_for(row) == ["ops/a_ops.cpp", "ops/common_a.cpp", "src/lib/a.cpp"]
    assert port.gates_reaching(row, "src/lib/a.cpp") == ["G1"]
    assert port.gates_reaching(row, "ops/common_b.cpp") == []


TINY_CMAKE = """cmake_minimum_required(VERSION 3.16)
project(tiny LANGUAGES CXX)
add_executable(tiny main.cpp value.cpp)
"""
MAIN = '#include <cstdio>\nint value();\nint main() { std::printf("%d\\n", value()); return 0; }\n'
VALUE = "int value() {\n  return 40 + 2;\n}\n"


@pytest.fixture()
def tiny(tmp_path: Path) -> tuple[Path, Implementation]:
    if not shutil.which("cmake") or not (shutil.which("g++") or shutil.which("c++")):
        pytest.skip("cmake and a C++ compiler are needed to build mutants")
    root = tmp_path / "project"
    root.mkdir()
    (root / "CMakeLists.txt").write_text(TINY_CMAKE)
    (root / "main.cpp").write_text(MAIN)
    (root / "value.cpp").write_text(VALUE)
    impl = Implementation("tiny", command=("build/tiny",), sources=("CMakeLists.txt", "*.cpp"),
                          build=(("cmake", "-S", ".", "-B", "build", "-DCMAKE_BUILD_TYPE=Release"),
                                 ("cmake", "--build", "build")))
    return root, impl


class CountingBuilds(MutantBuilds):
    builds = 0

    def _run_build(self) -> str | None:
        CountingBuilds.builds += 1
        return super()._run_build()


def test_a_mutant_is_built_once_and_then_served_from_the_cache(tiny: tuple[Path, Implementation], tmp_path: Path) -> None:
    root, impl = tiny
    plus = next(m for m in cpp_mutants("value.cpp", VALUE) if m.operator == "arith + -> -")
    builds = CountingBuilds(root, impl, tmp_path / "cache")
    CountingBuilds.builds = 0
    binary = builds.binary(plus)
    assert CountingBuilds.builds == 2  # the unmutated copy once, then the mutant
    assert subprocess.run([binary], capture_output=True, text=True, check=True).stdout == "38\n"
    assert (builds.tree / "value.cpp").read_text() == VALUE  # the copy restored
    again = CountingBuilds(root, impl, tmp_path / "cache")
    assert again.binary(plus) == binary
    assert CountingBuilds.builds == 3  # a new instance checks the unmutated copy once; the mutant is not rebuilt
    assert again.binary(plus) == binary and CountingBuilds.builds == 3
    zero = next(m for m in cpp_mutants("value.cpp", VALUE) if m.operator == "constant 0")
    assert subprocess.run([again.binary(zero)], capture_output=True, text=True, check=True).stdout == "2\n"
    assert (root / "value.cpp").read_text() == VALUE  # the project's own file never touched


def test_a_mutant_that_does_not_compile_raises_and_is_remembered(tiny: tuple[Path, Implementation], tmp_path: Path) -> None:
    root, impl = tiny
    broken = Mutant("value.cpp", 2, "hand-made", 0, VALUE.replace("40 + 2;", "40 +;"), "", "f" * 64)
    builds = CountingBuilds(root, impl, tmp_path / "cache")
    with pytest.raises(MutantDoesNotBuild, match=r"(?s)exited with status.*error"):
        builds.binary(broken)
    count = CountingBuilds.builds
    with pytest.raises(MutantDoesNotBuild):
        builds.binary(broken)
    assert CountingBuilds.builds == count
    assert (builds.tree / "value.cpp").read_text() == VALUE


def test_one_equivalents_file_serves_both_implementations(tmp_path: Path) -> None:
    """A row's equivalent_mutants.yaml may list the C++ port's mutants beside the Python port's: a run judges the
    entries of the files it mutates (and of files that no longer exist) for staleness, never the other's."""
    from _vllm_gates.mutation.mutate_report import Equivalent, stale_equivalents

    (tmp_path / "impl").mkdir()
    (tmp_path / "impl" / "m.py").write_text("x = 1\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.cpp").write_text("int x = 1;\n")
    declared = [Equivalent("ROW:impl/m.py:1:constant +1:0", "r", "a" * 64),
                Equivalent("ROW:impl/m.py:1:constant 0:0", "r", "b" * 64),
                Equivalent("ROW:src/m.cpp:1:precision double -> float:0", "r", "c" * 64),
                Equivalent("ROW:src/gone.cpp:3:precision drop static_cast<float>:0", "r", "d" * 64),
                Equivalent("ROW:gone", "r", "e" * 64)]
    assert declared[2].file == "src/m.cpp" and declared[4].file is None
    python_run = stale_equivalents(declared, {"a" * 64}, tmp_path, ["impl/m.py"])
    assert [e.id for e in python_run] == ["ROW:impl/m.py:1:constant 0:0", "ROW:src/gone.cpp:3:precision drop static_cast<float>:0",
                                          "ROW:gone"]
    cpp_run = stale_equivalents(declared, set(), tmp_path, ["src/m.cpp"])
    assert [e.id for e in cpp_run] == [declared[2].id, declared[3].id, declared[4].id]
