"""Paths stay inside the project, and definition files are read within limits.

A gate file's `spec:` and `sources:`, and the configured roadmap and `rows`/`specs` patterns, are refused when they
leave the project root (absolute, `..`, a symlink out); a definition file that is no regular file (a FIFO) is refused
without being opened; a file over the size limit is refused from its size; a document with too many YAML nodes is
refused while it is read, at the node that passes the limit; an alias bomb is refused when aliases are expanded.
Every refusal is a DefinitionError naming the place, and `gates list` exits 3 with it.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from _vllm_gates.base import yamlsource
from _vllm_gates.base.errors import DefinitionError
from _vllm_gates.base.yamlsource import MAX_FILE_BYTES, MAX_NODES, load_yaml
from _vllm_gates.definitions.gatefile import load_gate_file, peek_row_id
from _vllm_gates.definitions.roadmap import load_roadmap
from _vllm_gates.definitions.specdoc import requirements_in

pytestmark = pytest.mark.cpu

GATE_FILE = "gates/rows/example/gate.yaml"
SPEC_LINE = "spec: spec/example.md"
SOURCES_LINE = 'sources: ["example_row/*.py"]'

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
needs_symlink = pytest.mark.skipif(os.name == "nt", reason="symlinks need privileges on Windows")


def list_within(example, seconds: float = 60.0):
    """`gates list`, failing (not hanging) when it does not return in time: a FIFO opened for reading would block."""
    done: dict[str, object] = {}
    worker = threading.Thread(target=lambda: done.setdefault("result", example.gates("list")), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"`gates list` did not return within {seconds} s"
    return done["result"]


def refused(example, where: str, *says: str):
    result = list_within(example)
    assert result.code == 3, result.text
    assert where in result.err, result.err
    for fragment in says:
        assert fragment in result.err, result.err
    return result


# spec: -------------------------------------------------------------------------------------------------------------


def test_a_spec_that_climbs_out_of_the_root_is_refused(example):
    example.edit(SPEC_LINE, "spec: ../../outside/spec.md")
    refused(example, f"{GATE_FILE}:{example.line('spec:')}:", "spec: spec '../../outside/spec.md' leaves the project root")


def test_an_absolute_spec_is_refused_not_read(example, monkeypatch):
    opened: list[str] = []
    real_read = yamlsource.read_definition_text
    monkeypatch.setattr("_vllm_gates.definitions.specdoc.read_definition_text", lambda path, *a, **k: opened.append(str(path)) or real_read(path, *a, **k))
    example.edit(SPEC_LINE, "spec: /etc/passwd")
    result = refused(example, f"{GATE_FILE}:{example.line('spec:')}:", "spec '/etc/passwd' is an absolute path")
    assert opened == [] and "root:" not in result.text


@needs_symlink
def test_a_spec_symlinked_out_of_the_root_is_refused(example, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "spec.md"
    outside.write_text((example.root / "spec/example.md").read_text(encoding="utf-8"), encoding="utf-8")
    (example.root / "spec/link.md").symlink_to(outside)
    example.edit(SPEC_LINE, "spec: spec/link.md")
    refused(example, f"{GATE_FILE}:{example.line('spec:')}:", "spec 'spec/link.md' leaves the project root through a symlink",
            str(outside.resolve()))


def test_a_dotdot_that_stays_inside_the_root_is_accepted(example):
    example.edit(SPEC_LINE, "spec: spec/../spec/example.md")
    result = list_within(example)
    assert result.code == 0, result.text


@needs_fifo
def test_a_fifo_spec_is_refused_without_opening_it(example):
    (example.root / "docs").mkdir()
    os.mkfifo(example.root / "docs/pipe.md")  # outside `specs = ["spec/*.md"]`, whose matches are checked with the config
    example.edit(SPEC_LINE, "spec: docs/pipe.md")
    refused(example, f"{GATE_FILE}:{example.line('spec:')}:", "spec file 'docs/pipe.md' is a FIFO (named pipe), not a regular file")
    with pytest.raises(DefinitionError, match="is a FIFO"):
        requirements_in(example.root / "docs/pipe.md", "docs/pipe.md")


@needs_fifo
def test_a_fifo_matched_by_the_specs_pattern_is_refused(example):
    os.mkfifo(example.root / "spec/pipe.md")
    refused(example, "spec/pipe.md:1:1:", "spec file is a FIFO (named pipe), not a regular file",
            "matched by specs pattern 'spec/*.md'")


def test_an_oversized_spec_is_refused_at_the_spec_line(example):
    with open(example.root / "spec/huge.md", "wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)  # sparse: the size is what is checked, before anything is read
    example.edit(SPEC_LINE, "spec: spec/huge.md")
    refused(example, f"{GATE_FILE}:{example.line('spec:')}:", f"{MAX_FILE_BYTES + 1} bytes: over the 8 MiB limit on a spec file")


# sources: ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern, says", [
    ("/etc/*", "source pattern '/etc/*' is an absolute path"),
    ("!/etc/**", "source pattern '!/etc/**' is an absolute path"),
    ("../outside/**", "source pattern '../outside/**' has a '..' segment"),
    ("example_row/../../x.py", "source pattern 'example_row/../../x.py' has a '..' segment"),
])
def test_a_sources_glob_outside_the_project_is_refused(example, pattern, says):
    example.edit(SOURCES_LINE, f'sources: ["example_row/*.py", "{pattern}"]')
    text = example.read()
    column = text.splitlines()[example.line("sources:") - 1].index(f'"{pattern}"') + 1
    refused(example, f"{GATE_FILE}:{example.line('sources:')}:{column}: sources[1]: ", says)


# gate files that are no regular file, or too large ------------------------------------------------------------------


@needs_fifo
def test_a_fifo_gate_file_is_refused_without_opening_it(example):
    fifo = example.root / "gates/rows/pipe/gate.yaml"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    refused(example, "gates/rows/pipe/gate.yaml:1:1:", "gate file is a FIFO (named pipe), not a regular file",
            "matched by rows pattern 'gates/rows/*/gate.yaml'")
    with pytest.raises(DefinitionError, match="gate file is a FIFO"):
        load_gate_file(fifo, example.root, None, ("cpu",))
    assert peek_row_id(fifo) == "gate"


def test_an_oversized_gate_file_is_refused_from_its_size(example):
    with open(example.root / GATE_FILE, "r+b") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)
    refused(example, f"{GATE_FILE}:1:1:", f"gate file is {MAX_FILE_BYTES + 1} bytes: over the 8 MiB limit on a gate file")


def test_a_five_megabyte_flow_list_is_refused_while_it_is_read(example):
    example.write(GATE_FILE, "[" + ", ".join(["1"] * 1_600_000) + "]\n")
    assert (example.root / GATE_FILE).stat().st_size > 4_500_000
    # the root sequence is node 1: the node past the limit is item MAX_NODES, at column 2 + 3 * (MAX_NODES - 1)
    refused(example, f"{GATE_FILE}:1:{2 + 3 * (MAX_NODES - 1)}:", f"more than {MAX_NODES} YAML nodes")


def test_the_pure_python_composer_counts_nodes_as_it_composes(tmp_path, monkeypatch):
    """Without the libyaml pre-count, the composer itself refuses at the node past the limit."""
    monkeypatch.setattr(yamlsource, "_precount", lambda text, shown: None)
    monkeypatch.setattr(yamlsource, "MAX_NODES", 1000)
    path = tmp_path / "big.yaml"
    path.write_text("rows:\n" + "".join(f"  - {i}\n" for i in range(5000)), encoding="utf-8")
    with pytest.raises(DefinitionError) as error:
        load_yaml(path, "big.yaml")
    # node 1 is the mapping, 2 the key, 3 the sequence, then item k (0-based) is node 4 + k on line 2 + k
    assert str(error.value).startswith("big.yaml:999:5: more than 1000 YAML nodes"), str(error.value)


def test_an_alias_bomb_is_refused_as_alias_expansion(example):
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    example.write(GATE_FILE, example.read() + "notes:\n" + "".join(f"  {line}\n" for line in lines))
    refused(example, f"{GATE_FILE}:", f"more than {MAX_NODES} YAML values once aliases are expanded", "alias expansion")


def test_deep_nesting_is_refused_while_it_is_read(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("[" * 100_000, encoding="utf-8")
    with pytest.raises(DefinitionError, match="deep.yaml:1:66: nesting deeper than 64 levels"):
        load_yaml(path, "deep.yaml")


# the configuration: roadmap, rows and specs -------------------------------------------------------------------------


def _configure(example, line: str) -> int:
    example.edit("[tool.vllm-gates]\n", f"[tool.vllm-gates]\n{line}\n", "pyproject.toml")
    return example.line(line, relative="pyproject.toml")


@pytest.mark.parametrize("line, key, says", [
    ('roadmap = "../roadmap.yaml"', "roadmap", "roadmap '../roadmap.yaml' leaves the project root"),
    ('roadmap = "/etc/passwd"', "roadmap", "roadmap '/etc/passwd' is an absolute path"),
    ('rows = ["/tmp/*/gate.yaml"]', "rows", "rows pattern '/tmp/*/gate.yaml' is an absolute path"),
    ('rows = ["../*/gate.yaml"]', "rows", "rows pattern '../*/gate.yaml' has a '..' segment"),
    ('specs = ["spec/../../*.md"]', "specs", "specs pattern 'spec/../../*.md' has a '..' segment"),
])
def test_configured_paths_outside_the_root_are_refused(example, line, key, says):
    number = _configure(example, line)
    refused(example, f"pyproject.toml:{number}:1: [tool.vllm-gates] {key}: ", says)


@needs_symlink
def test_a_configured_roadmap_or_rows_folder_symlinked_out_of_the_root_is_refused(example, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "roadmap.yaml").write_text(example.read("spec/roadmap.yaml"), encoding="utf-8")
    (example.root / "spec/outside.yaml").symlink_to(outside / "roadmap.yaml")
    number = _configure(example, 'roadmap = "spec/outside.yaml"')
    refused(example, f"pyproject.toml:{number}:1: [tool.vllm-gates] roadmap: ",
            "roadmap 'spec/outside.yaml' leaves the project root through a symlink")
    example.edit('roadmap = "spec/outside.yaml"\n', "", "pyproject.toml")
    (example.root / "elsewhere").symlink_to(outside, target_is_directory=True)
    number = _configure(example, 'rows = ["elsewhere/*/gate.yaml"]')
    refused(example, f"pyproject.toml:{number}:1: [tool.vllm-gates] rows: ", "'elsewhere/*/gate.yaml'", "leaves the project root through a symlink")


@needs_symlink
def test_a_gate_file_matched_through_a_symlinked_folder_is_refused(example, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "gate.yaml").write_text(example.read(), encoding="utf-8")
    (example.root / "gates/rows/away").symlink_to(outside, target_is_directory=True)
    refused(example, "gates/rows/away/gate.yaml:1:1:", "gate file 'gates/rows/away/gate.yaml' leaves the project root through a symlink")


@needs_fifo
def test_a_fifo_roadmap_is_refused_without_opening_it(example, tmp_path):
    roadmap = example.root / "spec/roadmap.yaml"
    roadmap.unlink()
    os.mkfifo(roadmap)
    refused(example, "pyproject.toml:", "roadmap 'spec/roadmap.yaml' is a FIFO (named pipe), not a regular file")
    with pytest.raises(DefinitionError, match="roadmap is a FIFO"):
        load_roadmap(roadmap, "spec/roadmap.yaml")


def test_an_oversized_roadmap_is_refused_from_its_size(example):
    with open(example.root / "spec/roadmap.yaml", "r+b") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)
    refused(example, "spec/roadmap.yaml:1:1:", "over the 8 MiB limit on a roadmap")


def test_the_limits_are_what_the_messages_say():
    assert MAX_FILE_BYTES == 8 * 1024 * 1024 and MAX_NODES == 1_500_000 and Path(yamlsource.__file__).name == "yamlsource.py"


@needs_symlink
def test_a_spec_matched_through_a_symlink_out_of_the_root_is_refused_by_coverage(example, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "more.md"
    outside.write_text("- **EX-9.1** elsewhere\n", encoding="utf-8")
    (example.root / "spec/more.md").symlink_to(outside)
    result = example.gates("coverage")
    assert result.code == 3, result.text
    assert "spec/more.md:1:1: spec file 'spec/more.md' leaves the project root through a symlink" in result.err, result.err
    assert "matched by specs pattern 'spec/*.md'" in result.err
