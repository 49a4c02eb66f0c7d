"""The gatekeeping command cannot be narrowed unseen (src/_vllm_gates/frontends/selection_guard.py): `gates run` and `gates
audit` refuse, exit 2, the selection options that reach their pytest run from PYTEST_ADDOPTS or the ini file's
`addopts`, naming the source and the option, so a wrong implementation never exits 0 through them; options that only
change the output or the process still pass; a plain pytest run narrowed the same way keeps the partial-selection
banner in its table."""
from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.cpu

IMPL = "example_row/impl.py"
RETURN = "    return 2 * block_size * heads * head_size * dtype_bytes\n"
WRONG_FOR_THREE_HEADS = "    return 2 * block_size * heads * head_size * dtype_bytes + (1 if heads == 3 else 0)\n"
BANNER = "partial selection: only the gates selected are shown"


@pytest.fixture
def wrong(example):
    """The example with an impl wrong for 3 heads (the properties see it), right on the case fp16-page (2 heads)."""
    example.edit(RETURN, WRONG_FOR_THREE_HEADS, IMPL)
    return example


def _addopts(monkeypatch, options: str) -> None:
    monkeypatch.setenv("PYTEST_ADDOPTS", f"{os.environ.get('PYTEST_ADDOPTS', '')} {options}".strip())


def _ini_addopts(example, options: str) -> None:
    example.edit('addopts = "--strict-markers"', f'addopts = "--strict-markers {options}"', "pyproject.toml")


@pytest.mark.parametrize("command", ["run", "audit"])
def test_k_from_pytest_addopts_is_refused_naming_the_variable_and_the_option(wrong, monkeypatch, command):
    _addopts(monkeypatch, "-k fp16-page")
    result = wrong.gates(command, "--profile", "ci") if command == "run" else wrong.gates(command)
    assert result.code == 2, result.text
    assert "gates: refused: PYTEST_ADDOPTS sets -k fp16-page, which keeps only the items whose names match" in result.text
    assert "judge only what their own arguments select" in result.text
    assert "passed" not in result.text and "vllm-gates" not in result.text, "refused before anything ran"


def test_without_the_refusal_the_same_run_judges_the_wrong_impl(wrong):
    """The control: the wrong impl fails the whole run, so the refusal above hides no green."""
    result = wrong.gates("run", "--profile", "ci")
    assert result.code == 1, result.text


def test_k_from_the_ini_files_addopts_is_refused_naming_the_file(wrong):
    _ini_addopts(wrong, "-k fp16-page")
    result = wrong.gates("run", "--profile", "ci")
    assert result.code == 2, result.text
    assert "gates: refused: addopts in pyproject.toml sets -k fp16-page" in result.text, result.text


REFUSED = {
    "marker": ("-m cpu", "-m cpu, which keeps only the items whose markers match (use --marker)"),
    "glued-k": ("-kfp16", "-kfp16, which keeps only the items whose names match"),
    "deselect": ("--deselect=gates/rows/example/gate.yaml::page-bytes::properties",
                 "--deselect=gates/rows/example/gate.yaml::page-bytes::properties, which leaves these items out"),
    "node-id": ("gates/rows/example/gate.yaml::page-bytes::fp16-page",
                "gates/rows/example/gate.yaml::page-bytes::fp16-page, which adds node ids or paths"),
    "last-failed": ("--lf", "--lf, which runs only the items that failed last time"),
    "stepwise": ("--sw", "--sw, which stops at the first failure"),
    "audit-instead": ("--gates-audit", "--gates-audit, which judges the gates' known-bads instead of the implementation "
                                       "(use gates audit)"),
    "other-rows": ("--gates-row EXAMPLE-ROW", "--gates-row EXAMPLE-ROW, which narrows the rows judged"),
    "other-impl": ("--gates-impl=python", "--gates-impl=python, which changes the implementation judged (use --impl)"),
    "evidence": ("--gates-evidence old.json", "--gates-evidence old.json, which counts earlier reports"),
}


@pytest.mark.parametrize("options,says", REFUSED.values(), ids=REFUSED)
def test_each_selection_option_is_refused_from_either_source(wrong, monkeypatch, options, says):
    _addopts(monkeypatch, options)
    result = wrong.gates("run", "--profile", "ci")
    assert result.code == 2, result.text
    assert f"PYTEST_ADDOPTS sets {says}" in result.text, result.text
    monkeypatch.setenv("PYTEST_ADDOPTS", os.environ["PYTEST_ADDOPTS"].replace(options, ""))
    _ini_addopts(wrong, options)
    result = wrong.gates("run", "--profile", "ci")
    assert result.code == 2, result.text
    assert f"addopts in pyproject.toml sets {says}" in result.text, result.text


def test_options_that_change_only_the_output_or_stop_after_a_failure_pass_through(wrong, monkeypatch):
    """-v, -r, --tb, -W and -x are not refused: the run judges the wrong impl (-x stops at its failure: never 0)."""
    _addopts(monkeypatch, "-v -rA --tb=short -W default -x")
    result = wrong.gates("run", "--profile", "ci")
    assert result.code == 1, result.text
    assert "refused" not in result.text


@pytest.mark.parametrize("source", ["PYTEST_ADDOPTS", "addopts"])
def test_a_plain_pytest_run_narrowed_that_way_is_a_partial_selection_and_says_so(wrong, monkeypatch, source):
    if source == "PYTEST_ADDOPTS":
        _addopts(monkeypatch, "-k fp16-page")
    else:
        _ini_addopts(wrong, "-k fp16-page")
    result = wrong.pytest("gates")
    text = result.stdout.str()
    assert result.ret == 0, text  # the one case selected passes: judged on it alone, no claim judged
    assert "EXAMPLE-ROW::page-bytes: PASS: partial: 1 of 7 items selected" in text, text
    assert BANNER in text
