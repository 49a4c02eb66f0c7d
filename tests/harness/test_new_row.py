"""`gates new-row NAME` (docs/gating-a-port.md, "A row's files"): the row it writes passes as written, in the layout
that page describes, and every name or project it cannot write a row for is refused with nothing written."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _vllm_gates.frontends.new_row import Layout, row_names
from tests.harness.conftest import engine_env

pytestmark = pytest.mark.cpu

DOC = Path(__file__).resolve().parents[2] / "docs" / "gating-a-port.md"
WRITTEN = ["spec/demo-row.md", "gates/rows/demo_row/__init__.py", "gates/rows/demo_row/operations.yaml",
           "gates/rows/demo_row/gate.yaml", "gates/rows/demo_row/demo_row_blocks.py", "impl/demo_row.py",
           "oracles/demo_row.py", "spec/roadmap.yaml"]


def _with_port_packages(example) -> None:
    """The example project laid out as docs/gating-a-port.md says: a port package `impl`, an oracle package `oracles`."""
    example.write("impl/__init__.py", '"""The port."""\n')
    example.write("oracles/__init__.py", '"""The oracles."""\n')
    example.edit('allowed-roots = ["example_row", "gates"]', 'allowed-roots = ["example_row", "gates", "impl", "oracles"]',
                 "pyproject.toml")


def _gates(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`gates --root ROOT ARGS...` in a process of its own, as on a fresh checkout: the project's `impl`, `oracles` and
    `gates` packages are its own, never this repository's."""
    return subprocess.run([sys.executable, "-m", "_vllm_gates.frontends.cli", "--root", str(root), *args], cwd=root,
                          env=engine_env(), capture_output=True, text=True, timeout=300)


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def test_the_new_row_passes_its_gate_audit_and_independence_as_written(example):
    _with_port_packages(example)
    before = _tree(example.root)
    made = _gates(example.root, "new-row", "DEMO-ROW")
    assert made.returncode == 0, made.stdout + made.stderr
    listed = re.findall(r"^  (\S+)  ", made.stdout, re.MULTILINE)
    assert listed == WRITTEN, made.stdout
    after = _tree(example.root)
    assert sorted(set(after) - set(before)) == sorted(WRITTEN[:-1])
    assert after["spec/roadmap.yaml"].startswith(before["spec/roadmap.yaml"])  # the entry appended, nothing else moved
    assert "impl" not in after["oracles/demo_row.py"] and "oracles" not in after["impl/demo_row.py"].split('"""')[2]

    ran = _gates(example.root, "run", "DEMO-ROW", "--profile", "ci", "--json", "out/run.json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (row,) = json.loads((example.root / "out/run.json").read_text(encoding="utf-8"))["rows"]
    (gate,) = row["gates"]
    assert (row["row"], row["claim"]["state"], row["claim"]["claim_met"]) == ("DEMO-ROW", "GATING", True)
    assert (gate["gate"], gate["verdict"], gate["cases_passed"], gate["known_bad_rejected"], gate["known_bad_total"]) == \
        ("demo-row-blocks", "PASS", 1, 1, 1)
    assert gate["examples"] == 200 and 0 < gate["errors_agreed"] < gate["values_compared"]  # refusals drawn, most examples give values
    audited = _gates(example.root, "audit", "DEMO-ROW")
    assert audited.returncode == 0 and "1/1 rejected" in audited.stdout, audited.stdout + audited.stderr
    judge_side = subprocess.run([sys.executable, "-c", "import sys, gates.rows.demo_row.demo_row_blocks; "
                                 "print(sorted({m.split('.')[0] for m in sys.modules} & {'impl', 'oracles', 'torch'}))"],
                                cwd=example.root, env=engine_env(), capture_output=True, text=True, timeout=60)
    assert judge_side.stdout == "[]\n", judge_side.stdout + judge_side.stderr  # tests/test_judge_side.py's rule
    independent = _gates(example.root, "check-independence")
    assert independent.returncode == 0, independent.stdout + independent.stderr
    assert "DEMO-ROW-1.1" not in _gates(example.root, "coverage").stdout  # its one requirement is covered


def test_the_row_it_writes_fails_a_wrong_port(example):
    """The stub gate is a gate: the port made to round down, as the known-bad does, FAILs the named case and the
    properties. GATING tolerates that; once the row claims DONE, the run exits 1."""
    _with_port_packages(example)
    assert _gates(example.root, "new-row", "DEMO-ROW").returncode == 0
    example.edit("return (tokens + block_size - 1) // block_size", "return tokens // block_size", "impl/demo_row.py")
    ran = _gates(example.root, "run", "DEMO-ROW", "--profile", "ci", "--json", "out/run.json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (row,) = json.loads((example.root / "out/run.json").read_text(encoding="utf-8"))["rows"]
    assert (row["gates"][0]["verdict"], row["gates"][0]["reason"]) == ("FAIL", "failed: one-token-past-a-block, properties")
    example.write("spec/roadmap.yaml", example.read("spec/roadmap.yaml").replace("state: GATING", "state: DONE"))
    ran = _gates(example.root, "run", "DEMO-ROW", "--profile", "ci")
    assert ran.returncode == 1 and "DEMO-ROW: claims DONE but the verdict is FAIL" in ran.stdout, ran.stdout + ran.stderr


def test_the_files_it_writes_are_those_the_doc_lists():
    """docs/gating-a-port.md's table of a row's files, spelled for the row named there, is what new-row writes."""
    section = DOC.read_text(encoding="utf-8").split("## A row's files\n", 1)[1].split("\n## ", 1)[0]
    names = dict(re.findall(r"`(<\w+>)` = `([\w-]+)`", section))
    row = re.search(r"For `NAME` =\s+`([\w-]+)`", section)
    assert row and set(names) == {"<slug>", "<folder>", "<operation>"}, section

    def spelled(path: str) -> str:
        path = path.replace("<operation>.py", names["<operation>"].replace("-", "_") + ".py")  # dashes as underscores
        return re.sub(r"<\w+>", lambda m: names[m.group(0)], path)

    plan = Layout(row_names(row.group(1)), "gates/rows", "gate.yaml", "spec", "spec/roadmap.yaml", "cpu")
    documented = [spelled(path) for path in re.findall(r"^\| `([^`]+)` \|", section, re.MULTILINE)]
    assert sorted(documented) == sorted([*plan.files(), plan.roadmap])
    assert names == {"<slug>": plan.names.slug, "<folder>": plan.names.folder, "<operation>": plan.names.operation}


BAD_NAMES = {
    "lower-case": ("demo", "row name 'demo': a row id is upper-case letters and digits", "did you mean 'DEMO'?"),
    "underscore": ("DEMO_ROW", "row name 'DEMO_ROW'", "did you mean 'DEMO-ROW'?"),
    "leading-digit": ("9LIVES", "row name '9LIVES'", "starting with a letter"),
    "double-dash": ("DEMO--ROW", "row name 'DEMO--ROW'", "single dashes"),
    "trailing-dash": ("DEMO-", "row name 'DEMO-'", "did you mean 'DEMO'?"),
    "slash": ("gates/DEMO", "row name 'gates/DEMO'", "did you mean 'GATES-DEMO'?"),
    "empty": ("", "row name ''", "starting with a letter"),
    "keyword": ("IMPORT", "row name 'IMPORT': its folder and modules would be named 'import', a Python keyword", ""),
    "existing-row": ("EXAMPLE-ROW", "row EXAMPLE-ROW is already in spec/roadmap.yaml", ""),
}


def _refused(example, name: str) -> str:
    """`gates new-row NAME` in the example laid out for it: exit 2 with every file as it was; what it printed."""
    before = _tree(example.root)
    result = example.gates("new-row", name)
    assert result.code == 2, result.text
    assert _tree(example.root) == before
    return result.err


@pytest.mark.parametrize("name, says, hint", BAD_NAMES.values(), ids=BAD_NAMES.keys())
def test_a_bad_name_is_refused_with_nothing_written(example, name, says, hint):
    _with_port_packages(example)
    err = _refused(example, name)
    assert says in err and hint in err, err


REFUSED = {  # a path new-row would write, or a project not laid out for it: what the refusal says
    "row-folder": (lambda ex: ex.write("gates/rows/demo_row/notes.txt", "mine\n"),
                   "gates/rows/demo_row already exists; nothing was written"),
    "impl-module": (lambda ex: ex.write("impl/demo_row.py", "X = 1\n"), "impl/demo_row.py already exists; nothing"),
    "impl-package": (lambda ex: ex.write("impl/demo_row/__init__.py", ""),
                     "impl/demo_row/ already exists (the module impl.demo_row); nothing"),
    "oracle-module": (lambda ex: ex.write("oracles/demo_row.py", "X = 1\n"), "oracles/demo_row.py already exists; nothing"),
    "spec-file": (lambda ex: ex.write("spec/demo-row.md", "# mine\n"), "spec/demo-row.md already exists; nothing"),
    "operation": (lambda ex: ex.write("gates/rows/example/operations.yaml", "row: EXAMPLE-ROW\noperations:\n  demo-row-blocks: {}\n"),
                  "operation 'demo-row-blocks' is already declared in gates/rows/example/operations.yaml; nothing"),
    "no-impl-package": (lambda ex: (ex.root / "impl/__init__.py").unlink(), "impl/__init__.py not found under"),
    "impl-not-an-allowed-root": (lambda ex: ex.edit('"impl", "oracles"]', '"oracles"]', "pyproject.toml"),
                                 "allowed-roots = ['example_row', 'gates', 'oracles'] lacks 'impl'"),
    "roadmap-indented-by-four": (lambda ex: ex.write("spec/roadmap.yaml", ex.read("spec/roadmap.yaml").replace("\n  ", "\n    ")),
                                 "spec/roadmap.yaml: the row's entry cannot be appended at its end"),
}


@pytest.mark.parametrize("plant, says", REFUSED.values(), ids=REFUSED.keys())
def test_nothing_is_overwritten_nor_written_where_the_layout_does_not_fit(example, plant, says):
    _with_port_packages(example)
    plant(example)
    err = _refused(example, "DEMO-ROW")
    assert says in err, err
