"""What one load of a project shares between its gate files (resolved paths, each spec's requirement ids) gives what
reading each file alone gives, and a later load reads a changed file anew; the faster text checks of the YAML loader
say what the patterns they stand for say, and a control character is refused as the pure-Python reader refuses it.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from _vllm_gates.base import yamlsource
from _vllm_gates.base.errors import DefinitionError, Location
from _vllm_gates.definitions.config import load_config
from _vllm_gates.definitions.gatefile import LoadShare, _plain_case, load_gate_file
from _vllm_gates.definitions.model import Case
from _vllm_gates.definitions.project import load_project
from _vllm_gates.definitions.roadmap import load_roadmap

pytestmark = pytest.mark.cpu

PYPROJECT = '[tool.vllm-gates]\nroadmap = "spec/roadmap.yaml"\nrows = ["gates/rows/*/gate.yaml"]\nspecs = ["spec/*.md"]\n'
SPEC = "# Rows\n\n- **SH-1.1** one\n- **SH-1.2** two\n"
needs_symlink = pytest.mark.skipif(os.name == "nt", reason="symlinks need privileges on Windows")


def gate_text(row: str, covers: str, spec: str = "spec/rows.md") -> str:
    return (f"row: {row}\ntitle: {row}\nspec: {spec}\ngates:\n  - id: g\n    milestone: M1\n    covers: [{covers}]\n"
            "    markers: [cpu]\n    impl: m:f\n    cases:\n      c1: {input: {a: 1}, expect: 2}\n")


def project(root: Path, rows: dict[str, str]) -> Path:
    """A project of one gate file per row (row -> what its gate covers), every one naming spec/rows.md."""
    (root / "spec").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "spec" / "rows.md").write_text(SPEC)
    roadmap = ["rows:"] + [f"  {row}:\n    title: t\n    state: ACTIVE\n    milestones:\n      M1: {{title: m, state: ACTIVE}}"
                            for row in rows]
    (root / "spec" / "roadmap.yaml").write_text("\n".join(roadmap) + "\n")
    for row, covers in rows.items():
        folder = root / "gates" / "rows" / row.lower()
        folder.mkdir(parents=True)
        (folder / "gate.yaml").write_text(gate_text(row, covers))
    return root


def test_a_spec_changed_between_loads_is_read_anew(tmp_path: Path) -> None:
    root = project(tmp_path, {"SH-A": "SH-1.2", "SH-B": "SH-1.1"})
    first = load_project(load_config(root))
    assert not first.broken and len(first.gate_files) == 2
    (root / "spec" / "rows.md").write_text("# Rows\n\n- **SH-1.1** one\n")  # SH-1.2 is no longer declared
    second = load_project(load_config(root))
    assert set(second.broken) == {"SH-A"}
    assert "requirement 'SH-1.2' is not declared in spec/rows.md" in second.broken["SH-A"][1]


def test_a_source_created_between_loads_is_found_anew(tmp_path: Path) -> None:
    root = project(tmp_path, {"SH-A": "SH-1.1", "SH-B": "SH-1.2"})
    for row in ("sh-a", "sh-b"):
        gate = root / "gates" / "rows" / row / "gate.yaml"
        gate.write_text(gate_text(row.upper(), "SH-1.1").replace("spec: spec/rows.md\n", 'spec: spec/rows.md\nsources: ["lib/**"]\n'))
    first = load_project(load_config(root))
    assert set(first.broken) == {"SH-A", "SH-B"}
    assert all("source pattern 'lib/**' matches no file in the project" in message for _, message in first.broken.values())
    (root / "lib").mkdir()
    (root / "lib" / "m.py").write_text("")
    second = load_project(load_config(root))
    assert not second.broken and len(second.gate_files) == 2


def test_a_shared_load_says_what_each_file_alone_says(tmp_path: Path) -> None:
    root = project(tmp_path, {"SH-A": "SH-1.1", "SH-B": "SH-1.9", "SH-C": "SH-1.2"})
    (root / "gates" / "rows" / "sh-c" / "gate.yaml").write_text(gate_text("SH-C", "SH-1.2", "spec/missing.md"))
    config = load_config(root)
    roadmap = load_roadmap(root / config.roadmap, config.roadmap)
    share = LoadShare()
    for path in config.gate_files():
        alone = shared = None
        try:
            alone = load_gate_file(path, root, roadmap, config.marker_names)
        except DefinitionError as error:
            alone = str(error)
        try:
            shared = load_gate_file(path, root, roadmap, config.marker_names, share)
        except DefinitionError as error:
            shared = str(error)
        assert shared == alone, path
    messages = {row: message for row, (_, message) in load_project(config).broken.items()}
    assert set(messages) == {"SH-B", "SH-C"}
    assert "requirement 'SH-1.9' is not declared in spec/rows.md" in messages["SH-B"]
    assert "spec file 'spec/missing.md' does not exist" in messages["SH-C"]


def test_a_snapshot_says_of_a_broken_gate_what_loading_the_file_whole_says(tmp_path: Path) -> None:
    """Project loads each gate file once, gate by gate (as a run collects it); `gates list`'s whole-file view of it
    is derived, and must be word for word what a load of the whole file says (issue 27: one load per run)."""
    root = project(tmp_path, {"SH-A": "SH-1.1", "SH-B": "SH-1.2"})
    good = "  - id: g\n    milestone: M1\n    covers: [SH-1.1]\n    markers: [cpu]\n    impl: m:f\n    cases:\n      c1: {input: {a: 1}, expect: 2}\n"
    broken = [good.replace("id: g", f"id: {name}").replace(change[0], change[1]) for name, change in
              (("b1", ("milestone: M1", "milestone: M9")), ("b2", ("markers: [cpu]", "markers: [nope]")),
               ("b3", ("covers: [SH-1.1]", "covers: [SH-9.9]")))]
    gate_file = root / "gates" / "rows" / "sh-a" / "gate.yaml"
    gate_file.write_text(gate_text("SH-A", "SH-1.1").replace("gates:\n", "gates:\n" + broken[0]) + broken[1] + broken[2])
    config = load_config(root)
    with pytest.raises(DefinitionError) as whole:
        load_gate_file(gate_file, root, load_roadmap(root / config.roadmap, config.roadmap), config.marker_names)
    assert len(whole.value.problems) >= 3
    snapshot = load_project(config)
    assert snapshot.broken["SH-A"][1] == str(whole.value)
    assert [gf.row for gf in snapshot.gate_files] == ["SH-B"]
    loaded = snapshot.run_gate_file(gate_file)  # the run's view: the broken gates apart, the good one loaded
    assert [gate.id for gate in loaded.gates] == ["g"] and [gate.id for gate in loaded.broken_gates] == ["b1", "b2", "b3"]
    assert snapshot.run_gate_file(gate_file) is loaded  # parsed once per snapshot


@needs_symlink
def test_a_shared_resolution_is_what_pathlib_resolves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "real" / "inner").mkdir(parents=True)
    (tmp_path / "real" / "inner" / "f.yaml").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "file-link.yaml").symlink_to(tmp_path / "real" / "inner" / "f.yaml")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    monkeypatch.chdir(tmp_path)
    share = LoadShare()
    for path in (tmp_path / "real" / "inner" / "f.yaml", tmp_path / "link" / "inner" / "f.yaml", tmp_path / "real" / "file-link.yaml",
                 tmp_path / "link" / ".." / "real" / "inner", tmp_path / "real" / "missing" / "x.md", Path("link/inner/f.yaml"),
                 Path("."), Path("real")):
        assert share.resolve(path) == path.resolve(), path
        assert share.resolve(path) == path.resolve(), path  # a second time, from what the share remembers
    with pytest.raises(RuntimeError) as by_pathlib:
        (tmp_path / "loop" / "x").resolve()
    with pytest.raises(RuntimeError) as shared:
        share.resolve(tmp_path / "loop" / "x")
    assert str(shared.value) == str(by_pathlib.value)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.text(alphabet=st.sampled_from(list("ab #|>-+09!\t\r\n:{}é") + ["\ufeff", "\x85", "\u2028", "\u2029"]), max_size=16))
def test_the_libyaml_differs_check_says_what_its_pattern_says(text: str) -> None:
    assert yamlsource._libyaml_differs(text) == bool(yamlsource._LIBYAML_DIFFERS.search(text))


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=8))
def test_the_printable_check_says_what_the_reader_says(text: str) -> None:
    assert yamlsource._printable(text) == (yaml.reader.Reader.NON_PRINTABLE.search(text) is None)


@pytest.mark.parametrize("text", ["a: 1\nb: \x01\n", "a: \x7f", "key: \ud800\n", "a:\n  - \x00"])
def test_a_control_character_is_refused_as_the_reader_refuses_it(text: str) -> None:
    with pytest.raises(yaml.YAMLError) as by_reader:
        yaml.SafeLoader(text)
    with pytest.raises(DefinitionError) as refused:
        yamlsource.load_yaml("f.yaml", text=text)
    where = yamlsource._mark_location("f.yaml", by_reader.value, text)
    assert str(refused.value) == f"{where}: YAML error: {yamlsource._one_line(by_reader.value)}"


def test_a_case_made_through_its_fields_is_the_case_its_init_makes() -> None:
    made = _plain_case("c1", Location("g.yaml", 3, 7), {"a": [1, 2]}, True, {"b": None})
    assert made == Case("c1", Location("g.yaml", 3, 7), {"a": [1, 2]}, True, {"b": None}, None)
    assert repr(made) == repr(Case("c1", Location("g.yaml", 3, 7), {"a": [1, 2]}, True, {"b": None}, None))
