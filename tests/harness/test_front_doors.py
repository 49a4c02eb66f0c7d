"""One engine, two front doors: `pytest` and `gates run` give the same verdicts, claims and exit codes.

Also: a project with its own `gates/` package works under both (in fresh processes, so nothing of this
repository is importable), and an unrelated project with the plugin installed is left alone.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.harness.conftest import EXAMPLE, engine_env

pytestmark = pytest.mark.cpu

KNOWN_BAD_BLOCK = ("    known_bad:\n      drops-factor-two: .known_bad:drops_factor_two\n"
                   "      wrong-for-big-heads: .known_bad:wrong_only_for_big_heads\n      accepts-negative: .known_bad:accepts_negative\n")

VARIANTS = {
    "green": lambda ex: None,
    "weak-no-known-bad": lambda ex: ex.edit(KNOWN_BAD_BLOCK, ""),
    "fail-wrong-impl": lambda ex: ex.edit("    return 2 * block_size", "    return (1 if heads == 4 else 0) + 2 * block_size",
                                          "example_row/impl.py"),
    "error-unknown-marker": lambda ex: ex.edit("markers: [cpu]", "markers: [tpu]"),
    "empty-milestone": lambda ex: ex.set_roadmap({"EXAMPLE-ROW": ("DONE", {"M1": "DONE", "M2": "DONE"})}),
    "active-row-tolerates-weak": lambda ex: (ex.edit(KNOWN_BAD_BLOCK, ""),
                                             ex.set_roadmap({"EXAMPLE-ROW": ("ACTIVE", {"M1": "ACTIVE"})})),
}


def _claims(report: dict) -> list[tuple]:
    out = []
    for row in report["rows"]:
        out.append((row["row"], None, row["claim"]["verdict"], row["claim"]["claim_met"]))
        out += [(row["row"], m["milestone"], m["verdict"], m["claim_met"]) for m in row["milestones"]]
        out += [(row["row"], g["gate"], g["verdict"], g["known_bad_rejected"], g["cases_passed"]) for g in row["gates"]]
    return out


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANTS)
def test_pytest_and_gates_run_agree_on_every_row(example, variant):
    VARIANTS[variant](example)
    by_cli, cli_report = example.run_json("--profile", "ci")
    target = example.root / "out" / "pytest.json"
    by_pytest = example.pytest("--hypothesis-profile=ci", f"--gates-json={target}", "gates")
    pytest_report = json.loads(target.read_text(encoding="utf-8"))
    assert int(by_pytest.ret) == by_cli.code == cli_report["exit_code"] == pytest_report["exit_code"], by_cli.text
    assert _claims(pytest_report) == _claims(cli_report)
    assert "vllm-gates" in by_pytest.stdout.str(), "pytest prints the row table too"


EXPECTED_CODES = {"green": 0, "weak-no-known-bad": 1, "fail-wrong-impl": 1, "error-unknown-marker": 3,
                  "empty-milestone": 1, "active-row-tolerates-weak": 0}


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANTS)
def test_the_exit_code_of_each_variant(example, variant):
    VARIANTS[variant](example)
    assert example.gates("run", "--profile", "ci").code == EXPECTED_CODES[variant]


# a user's project with its own `gates` package, in fresh processes --------------------------------------------

def _fresh_env() -> dict[str, str]:
    """The environment of a user's shell: nothing of this repository on PYTHONPATH but the engine under test, no CI
    profile forced."""
    return engine_env("CI")


def _gates_command() -> list[str]:
    found = shutil.which("gates", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "_vllm_gates.frontends.cli"]


def test_a_project_with_its_own_gates_package_passes_under_both_front_doors(tmp_path):
    project = tmp_path / "user-project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    assert (project / "gates" / "__init__.py").is_file(), "the example names its content package `gates`, as users do"
    env = _fresh_env()
    by_pytest = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"], cwd=project, env=env,
                               capture_output=True, text=True, timeout=300)
    assert by_pytest.returncode == 0, by_pytest.stdout + by_pytest.stderr
    assert "EXAMPLE-ROW" in by_pytest.stdout and "7 passed" in by_pytest.stdout
    by_cli = subprocess.run([*_gates_command(), "run", "--json", "out.json"], cwd=project, env=env,
                            capture_output=True, text=True, timeout=300)
    assert by_cli.returncode == 0, by_cli.stdout + by_cli.stderr
    report = json.loads((project / "out.json").read_text(encoding="utf-8"))
    assert [(r["row"], r["claim"]["verdict"], r["claim"]["claim_met"]) for r in report["rows"]] == [("EXAMPLE-ROW", "PASS", True)]


def test_gates_run_finds_the_project_from_a_subfolder(tmp_path):
    project = tmp_path / "user-project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([*_gates_command(), "list"], cwd=project / "spec", env=_fresh_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "page-bytes" in done.stdout


# an unrelated project: the plugin is installed but inert --------------------------------------------------------

UNRELATED_TEST = '''
from hypothesis import given, settings, strategies as st


def test_unmarked(request):
    assert request.node.get_closest_marker("cpu") is None
    assert settings.get_current_profile_name() == "default"


@given(st.integers())
def test_property(value):
    assert settings.get_current_profile_name() == "default"
'''


def test_an_unrelated_project_keeps_hypothesis_default_and_gets_no_marker(tmp_path):
    project = tmp_path / "unrelated"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "unrelated"\nversion = "1"\n\n[tool.pytest.ini_options]\n'
                                            'addopts = "-p no:cacheprovider"\n', encoding="utf-8")
    (project / "test_unrelated.py").write_text(textwrap.dedent(UNRELATED_TEST), encoding="utf-8")
    (project / "gates" / "rows" / "x").mkdir(parents=True)
    (project / "gates" / "rows" / "x" / "gate.yaml").write_text("not: a gate file of this project\n", encoding="utf-8")
    env = _fresh_env()
    listed = subprocess.run([sys.executable, "-m", "pytest", "--version", "--version"], cwd=project, env=env, capture_output=True, text=True)
    assert "vllm-gates" in listed.stdout + listed.stderr, "the plugin is installed, so it is loaded here too"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "."], cwd=project, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout and "vllm-gates" not in done.stdout
    plugins = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-m", "cpu", "."], cwd=project, env=env,
                             capture_output=True, text=True)
    assert plugins.returncode == 5, plugins.stdout + plugins.stderr  # `-m cpu` selects nothing: no test was marked cpu


# the README's "add a row" template is the example project's row, as it stands -----------------------------------

def _fenced_after(text: str, marker: str) -> str:
    """The body of the first fenced block after ``marker`` (from the line after the marker when it is inside one)."""
    after = text[text.index(marker):]
    if marker.startswith("#"):  # the marker is the block's first line
        body = after[after.index("\n") + 1:]
    else:
        fence = after.index("```")
        body = after[after.index("\n", fence) + 1:]
    return body[:body.index("```")]


def test_the_readme_row_template_is_the_example_projects_row_verbatim():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    gate = _fenced_after(readme, "# gates/rows/example/gate.yaml")
    assert gate == (EXAMPLE / "gates" / "rows" / "example" / "gate.yaml").read_text(encoding="utf-8")
    toml = _fenced_after(readme, "Its `pyproject.toml` says which packages targets may name:")
    assert toml.strip() and toml in (EXAMPLE / "pyproject.toml").read_text(encoding="utf-8")


def test_the_engines_wheel_holds_the_engine_alone():
    """The wheel's packages come from src/: this repository's rows, fixtures, impl and oracles are content, not the tool."""
    setuptools = pytest.importorskip("setuptools")
    src = Path(__file__).resolve().parents[2] / "src"
    found = sorted(setuptools.find_packages(str(src)))
    subpackages = sorted(f"_vllm_gates.{path.parent.name}" for path in (src / "_vllm_gates").glob("*/__init__.py"))
    assert found == ["_vllm_gates", *subpackages, "vllm_gates"] and len(subpackages) > 1
    import vllm_gates

    assert vllm_gates.__all__ == ["Call", "settings", "as_torch", "strategies", "__version__"]  # issue 29: tensors
    assert vllm_gates.strategies.tensors and vllm_gates.strategies.shapes
