"""Changed-file selection in a git checkout: `gates affected --base REF` and `gates run --changed-since REF`."""
from __future__ import annotations

import subprocess

import pytest

pytestmark = pytest.mark.cpu


def git(root, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=Harness Test", "-c", "user.email=harness@example.invalid",
                           "-c", "commit.gpgsign=false", *args], cwd=root, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def checkout(example):
    """The example with a second row whose sources are other_row/*.py, committed to a fresh git repository."""
    example.add_row("SECOND-ROW")
    example.edit('sources: ["example_row/*.py"]', 'sources: ["other_row/*.py"]', "gates/rows/second_row/gate.yaml")
    example.write("other_row/__init__.py", "")
    example.write(".gitignore", "__pycache__/\n.pytest_cache/\nout/\n")
    example.write("README.md", "# a checkout\n")
    git(example.root, "init", "-q", "-b", "main")
    git(example.root, "add", "-A")
    git(example.root, "commit", "-q", "-m", "base")
    return example


def _affected(checkout, base: str = "HEAD") -> list[str]:
    result = checkout.gates("affected", "--base", base)
    assert result.code == 0, result.text
    return result.out.split()


CHANGES = {
    "source-edited": ("example_row/impl.py", None, ["EXAMPLE-ROW"]),
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
    checkout.write("example_row/impl.py", checkout.read("example_row/impl.py") + "# touched\n")
    git(checkout.root, "commit", "-q", "-am", "touch impl")
    assert _affected(checkout, "HEAD") == []
    assert _affected(checkout, "HEAD~1") == ["EXAMPLE-ROW"]


def test_run_changed_since_runs_only_the_affected_row(checkout):
    checkout.write("example_row/impl.py", checkout.read("example_row/impl.py") + "# touched\n")
    result, report = checkout.run_json("--changed-since", "HEAD")
    assert result.code == 0, result.text
    assert report["meta"]["rows"] == ["EXAMPLE-ROW"] and report["meta"]["changed_since"] == "HEAD"
    assert [r["row"] for r in report["rows"]] == ["EXAMPLE-ROW"]
    assert {i["row"] for i in report["items"]} == {"EXAMPLE-ROW"} and len(report["items"]) == 7


def test_run_changed_since_with_an_unrelated_change_runs_nothing(checkout):
    checkout.write("README.md", "# changed\n")
    result = checkout.gates("run", "--changed-since", "HEAD")
    assert result.code == 0, result.text
    assert "no row is affected by changes since HEAD: nothing to gate" in result.out
    assert "passed" not in result.out  # pytest did not run


def test_an_unknown_ref_is_a_usage_error(checkout):
    for args in (("affected", "--base", "no-such-ref"), ("run", "--changed-since", "no-such-ref")):
        result = checkout.gates(*args)
        assert result.code == 2
        assert "gates: error: git rev-parse" in result.err


def test_a_broken_row_is_always_selected(checkout):
    """A gate file that does not load cannot say what its sources are: it is never skipped as unaffected."""
    checkout.edit("markers: [cpu]", "markers: [tpu]", "gates/rows/second_row/gate.yaml")
    git(checkout.root, "commit", "-q", "-am", "break the second row")
    checkout.write("README.md", "# changed\n")
    result = checkout.gates("run", "--changed-since", "HEAD")
    assert result.code == 3
    assert "SECOND-ROW" in result.out
