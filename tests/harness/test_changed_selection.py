"""Changed-file selection in a git checkout: `gates affected --base REF` and `gates run --changed-since REF`."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu

GATE_FILE = "gates/rows/example/gate.yaml"


def git(root, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=Harness Test", "-c", "user.email=harness@example.invalid",
                           "-c", "commit.gpgsign=false", *args], cwd=root, capture_output=True, text=True, check=True)
    return done.stdout


def commit_all(example, message: str = "base"):
    """Commit every file of the example (a fresh repository on the first call); return the example."""
    if not (example.root / ".git").exists():
        example.write(".gitignore", "__pycache__/\n.pytest_cache/\nout/\n")
        example.write("README.md", "# a checkout\n")
        git(example.root, "init", "-q", "-b", "main")
    git(example.root, "add", "-A")
    git(example.root, "commit", "-q", "-m", message)
    return example


@pytest.fixture
def checkout(example):
    """The example with a second row whose sources are other_row/*.py, committed to a fresh git repository."""
    example.add_row("SECOND-ROW")
    example.edit('sources: ["example_row/*.py"]', 'sources: ["other_row/*.py"]', "gates/rows/second_row/gate.yaml")
    example.write("other_row/__init__.py", "")
    return commit_all(example)


def _affected(checkout, base: str = "HEAD") -> list[str]:
    result = checkout.gates("affected", "--base", base)
    assert result.code == 0, result.text
    return result.out.split()


CHANGES = {
    "source-edited": ("example_row/impl.py", None, ["EXAMPLE-ROW", "SECOND-ROW"]),  # the second row imports it too
    "source-added-untracked": ("example_row/extra.py", "X = 1\n", ["EXAMPLE-ROW"]),
    "gate-file-edited": ("gates/rows/example/gate.yaml", None, ["EXAMPLE-ROW"]),
    "spec-edited": ("spec/example.md", None, ["EXAMPLE-ROW", "SECOND-ROW"]),  # both rows name this spec
    "other-row-source": ("other_row/__init__.py", None, ["SECOND-ROW"]),
    "unrelated-file": ("README.md", None, []),
    "unrelated-new-file": ("docs/notes.txt", "notes\n", []),
}


@pytest.mark.parametrize("path,new_text,rows", CHANGES.values(), ids=CHANGES.keys())
def test_affected_selects_rows_whose_sources_changed(checkout, path, new_text, rows):
    target = checkout.root / path
    text = new_text if new_text is not None else target.read_text(encoding="utf-8") + "# touched\n"
    checkout.write(path, text)
    assert _affected(checkout) == rows


def test_nothing_changed_selects_nothing(checkout):
    assert _affected(checkout) == []


def test_a_committed_change_is_seen_from_an_older_base(checkout):
    checkout.write("gates/rows/example/known_bad.py", checkout.read("gates/rows/example/known_bad.py") + "# touched\n")
    git(checkout.root, "commit", "-q", "-am", "touch a known-bad")
    assert _affected(checkout, "HEAD") == []
    assert _affected(checkout, "HEAD~1") == ["EXAMPLE-ROW"]


def test_run_changed_since_runs_only_the_affected_row(checkout):
    checkout.write("gates/rows/example/known_bad.py", checkout.read("gates/rows/example/known_bad.py") + "# touched\n")
    result, report = checkout.run_json("--changed-since", "HEAD")
    assert result.code == 0, result.text
    assert report["meta"]["rows"] == ["EXAMPLE-ROW"] and report["meta"]["changed_since"] == "HEAD"
    assert [r["row"] for r in report["rows"]] == ["EXAMPLE-ROW"]
    assert {i["row"] for i in report["items"]} == {"EXAMPLE-ROW"} and len(report["items"]) == 7


def test_run_changed_since_with_an_unrelated_change_runs_nothing(checkout):
    checkout.write("README.md", "# changed\n")
    out = checkout.root / "out"
    result = checkout.gates("run", "--changed-since", "HEAD", "--json", str(out / "r.json"), "--markdown", str(out / "r.md"),
                            "--junit", str(out / "r.xml"))
    assert result.code == 0, result.text
    assert "no row is affected by changes since HEAD: nothing to gate" in result.out
    assert "passed" not in result.out  # pytest did not run
    report = json.loads((out / "r.json").read_text(encoding="utf-8"))
    assert report["rows"] == [] and report["meta"]["nothing_affected"] is True and report["meta"]["changed_since"] == "HEAD"
    assert (out / "r.md").is_file() and (out / "r.xml").is_file(), "every requested report is written, saying so"
    by_pytest = checkout.pytest("--gates-changed-since", "HEAD", f"--gates-json={out / 'p.json'}")
    assert by_pytest.ret == 0 and json.loads((out / "p.json").read_text(encoding="utf-8"))["meta"]["nothing_affected"] is True


def test_an_unknown_ref_is_a_usage_error(checkout):
    for args in (("affected", "--base", "no-such-ref"), ("run", "--changed-since", "no-such-ref")):
        result = checkout.gates(*args)
        assert result.code == 2
        assert "gates: error: 'no-such-ref' is not a commit git knows here" in result.err, "the reason is never empty"


def test_a_broken_row_is_always_selected(checkout):
    """A gate file that does not load cannot say what its sources are: it is never skipped as unaffected."""
    checkout.edit("markers: [cpu]", "markers: [tpu]", "gates/rows/second_row/gate.yaml")
    git(checkout.root, "commit", "-q", "-am", "break the second row")
    checkout.write("README.md", "# changed\n")
    result = checkout.gates("run", "--changed-since", "HEAD")
    assert result.code == 3
    assert "SECOND-ROW" in result.out


# selection that cannot miss: imports, roadmap entries, every-row changes -------------------------------------------

SECOND_GATE_FILE = "gates/rows/second_row/gate.yaml"
IMPL_DOCSTRING = '"""Toy impl: bytes of one KV page by formula (EX-1.1, EX-1.2)."""\n'


@pytest.fixture
def split(example):
    """Two rows with their own impls, committed: EXAMPLE-ROW's imports page_geometry/factors.py, which no `sources:`
    names (the python port declares it among what it reads); SECOND-ROW's (other_row/impl.py) imports nothing of the
    project but example_row's oracle."""
    example.add_row("SECOND-ROW")
    example.write("other_row/__init__.py", "")
    example.write("other_row/impl.py", example.read("example_row/impl.py"))
    example.edit('sources: ["example_row/*.py"]', 'sources: ["other_row/*.py"]', SECOND_GATE_FILE)
    example.edit("impl: example_row.impl:page_bytes", "impl: other_row.impl:page_bytes", SECOND_GATE_FILE)
    example.edit('allowed-roots = ["example_row", "gates"]', 'allowed-roots = ["example_row", "other_row", "gates"]', "pyproject.toml")
    # page_geometry is no allowed root: the impl's confined workers read it only where `reads` names it
    example.write("pyproject.toml", example.read("pyproject.toml") + '\n[tool.vllm-gates.implementations.python]\n'
                  'reads = ["example_row", "other_row", "page_geometry", "gates/**/*.py"]\n')
    example.write("page_geometry/__init__.py", '"""Helpers of the example impl."""\n')
    example.write("page_geometry/factors.py", "KV = 2  # a K page and a V page\n")
    example.edit(IMPL_DOCSTRING, IMPL_DOCSTRING + "from page_geometry import factors\n", "example_row/impl.py")
    example.edit("    return 2 * block_size", "    return factors.KV * block_size", "example_row/impl.py")
    return commit_all(example)


def _explained(checkout, base: str = "HEAD") -> str:
    result = checkout.gates("affected", "--base", base, "--explain")
    assert result.code == 0, result.text
    return result.out


def test_the_split_rows_pass_as_committed(split):
    result = split.gates("run")
    assert result.code == 0, result.text


def test_an_imported_file_that_no_sources_glob_names_selects_its_row(split):
    split.write("page_geometry/factors.py", "KV = 3  # wrong\n")
    assert _affected(split) == ["EXAMPLE-ROW"]
    assert _explained(split) == "EXAMPLE-ROW\n  imports page_geometry/factors.py (changed)\n"
    result, report = split.run_json("--changed-since", "HEAD")
    assert result.code == 1, result.text  # the row claims DONE and its gate now fails
    assert report["meta"]["rows"] == ["EXAMPLE-ROW"]


def test_a_removed_imported_module_selects_its_row(split):
    (split.root / "page_geometry/factors.py").unlink()
    assert _explained(split) == "EXAMPLE-ROW\n  imports page_geometry.factors (page_geometry/factors.py changed)\n"


def _claim(split, example_state: str) -> None:
    split.set_roadmap({"EXAMPLE-ROW": (example_state, {"M1": example_state}), "SECOND-ROW": ("DONE", {"M1": "DONE"})})


def test_a_claim_upgrade_alone_selects_the_row_and_the_run_fails(split):
    _claim(split, "ACTIVE")
    split.write("page_geometry/factors.py", "KV = 3  # wrong, tolerated while the row claims ACTIVE\n")
    commit_all(split, "a failing gate, claimed ACTIVE")
    _claim(split, "DONE")
    assert _explained(split) == "EXAMPLE-ROW\n  its roadmap entry changed (state ACTIVE -> DONE; milestone M1 state ACTIVE -> DONE)\n"
    result, report = split.run_json("--changed-since", "HEAD")
    assert result.code == 1, result.text
    assert report["meta"]["rows"] == ["EXAMPLE-ROW"]
    assert "claims DONE but the verdict is FAIL" in result.out


def test_a_row_new_in_the_roadmap_is_selected(split):
    roadmap = split.read("spec/roadmap.yaml")
    split.write("spec/roadmap.yaml", roadmap + "  THIRD-ROW:\n    title: t\n    state: INVENTORIED\n"
                                               "    milestones:\n      M1: {title: m, state: INVENTORIED}\n")
    assert _explained(split) == "THIRD-ROW\n  it is new in the roadmap (not in spec/roadmap.yaml at HEAD)\n"


def test_a_roadmap_notes_edit_selects_nothing(split):
    split.edit("title: SECOND-ROW title", "title: SECOND-ROW title\n    notes: parsed, but no part of the entry",
               "spec/roadmap.yaml")
    assert _affected(split) == []


@pytest.mark.parametrize("at_base, says", [
    ("rows: [\n", "the roadmap does not load at HEAD (HEAD:spec/roadmap.yaml:"),
    (None, "the roadmap cannot be read at HEAD (git show HEAD:./spec/roadmap.yaml failed:"),
], ids=["does-not-parse", "missing"])
def test_a_roadmap_that_cannot_be_compared_selects_every_row(split, at_base, says):
    current = split.read("spec/roadmap.yaml")
    if at_base is None:
        (split.root / "spec/roadmap.yaml").unlink()
    else:
        split.write("spec/roadmap.yaml", at_base)
    commit_all(split, "the roadmap at base")
    split.write("spec/roadmap.yaml", current)
    out = _explained(split)
    assert out.splitlines()[0::2] == ["EXAMPLE-ROW", "SECOND-ROW"]
    assert out.count(says) == 2 and out.count("its entry cannot be compared") == 2, out


def test_editing_pyproject_selects_every_row(split):
    split.write("pyproject.toml", split.read("pyproject.toml") + "# touched\n")
    assert _explained(split) == ("EXAMPLE-ROW\n  pyproject.toml changed: every row\n"
                                 "SECOND-ROW\n  pyproject.toml changed: every row\n")


def test_editing_a_package_init_on_one_rows_import_path_selects_every_row(split):
    split.write("page_geometry/__init__.py", '"""Helpers."""\nKV = 2\n')
    reason = "  package file page_geometry/__init__.py on a row's import path changed: every row\n"
    assert _explained(split) == f"EXAMPLE-ROW\n{reason}SECOND-ROW\n{reason}"


def test_a_harness_change_selects_every_row(split, monkeypatch):
    """The engine's folders are found from its modules' `__file__`; here one is placed inside the project."""
    import importlib

    selection = importlib.import_module("_vllm_gates.run.selection")  # the module the CLI imports: pytester may have
    # dropped an earlier one from sys.modules, which `from _vllm_gates.run import selection` would still return

    monkeypatch.setattr(selection, "_engine_folders", lambda config: ["tools/engine"])
    split.write("tools/engine/plugin.py", "X = 1\n")
    assert _affected(split) == ["EXAMPLE-ROW", "SECOND-ROW"]
    assert "  the harness changed (tools/engine/plugin.py): every row\n" in _explained(split)


def test_the_engine_folders_of_this_repository_are_its_packages():
    import _vllm_gates

    from _vllm_gates.definitions.config import Config
    from _vllm_gates.run.selection import _engine_folders

    root = Path(__file__).resolve().parents[2]
    if root not in Path(_vllm_gates.__file__).resolve().parents:
        pytest.skip("the engine is installed from elsewhere")
    assert _engine_folders(Config(root)) == ["src/_vllm_gates", "src/vllm_gates"]


@pytest.mark.parametrize("path", ["README.md", "docs/notes.txt", "tools/report.py", "other_row/notes.md"])
def test_an_unrelated_file_selects_nothing(split, path):
    split.write(path, "import page_geometry.factors\n" if path.endswith(".py") else "text\n")
    assert _affected(split) == []
    assert _explained(split) == "no row is affected by changes since HEAD\n"


def test_affected_without_git_on_path_says_so(split, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    result = split.gates("affected", "--base", "HEAD")
    assert result.code == 2
    assert result.err == "gates: error: cannot find what changed: git is not on PATH\n"


# sources: globs must match ------------------------------------------------------------------------------------------

SOURCES_LINE = 'sources: ["example_row/*.py"]'


@pytest.mark.parametrize("pattern", ["impl/nope/**", "example_row/*.pyx", "example_row/impl"])
def test_a_sources_glob_that_matches_no_file_is_a_definition_error(example, pattern):
    example.edit(SOURCES_LINE, f'sources: ["example_row/*.py", "!example_row/gone.py", "{pattern}"]')
    line = example.line("sources:")
    column = example.read().splitlines()[line - 1].index(f'"{pattern}"') + 1
    result = example.gates("list")
    assert result.code == 3, result.text
    assert f"{GATE_FILE}:{line}:{column}: sources[2]: source pattern {pattern!r} matches no file in the project" in result.err


def test_sources_globs_that_match_load(example):
    example.edit(SOURCES_LINE, 'sources: ["example_row/**", "example_row/impl.py", "spec/*.md", "!example_row/gone.py"]')
    result = example.gates("list")
    assert result.code == 0, result.text
