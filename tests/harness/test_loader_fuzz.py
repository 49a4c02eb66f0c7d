"""The gate-file loader, fed random documents and random edits of the real example, raises DefinitionError or
returns a GateFile: never any other exception (a crash would take down `gates list`/`run` and pytest collection).

A full-alphabet fuzz adds control characters and tags whose values cannot be built (`!!int abc`, `2020-13-45`);
named hostile inputs follow as explicit cases.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from _vllm_gates.base.errors import DefinitionError
from _vllm_gates.definitions.gatefile import FILE_KEYS_OPTIONAL, FILE_KEYS_REQUIRED, GATE_KEYS_OPTIONAL, GATE_KEYS_REQUIRED, load_gate_file
from _vllm_gates.definitions.model import GateFile
from _vllm_gates.definitions.roadmap import load_roadmap

pytestmark = pytest.mark.cpu

EXAMPLE = Path(__file__).resolve().parents[1] / "example_project"
GATE_FILE = "gates/rows/example/gate.yaml"
REAL_TEXT = (EXAMPLE / GATE_FILE).read_text(encoding="utf-8")
FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    shutil.copytree(EXAMPLE / "spec", root / "spec")
    shutil.copytree(EXAMPLE / "example_row", root / "example_row")  # the real file's sources glob must match a file
    (root / "gates" / "rows" / "example").mkdir(parents=True)
    return root, load_roadmap(root / "spec" / "roadmap.yaml", "spec/roadmap.yaml")


def load_text(project, text: str):
    """Write the text as the gate file and load it; return the GateFile or the DefinitionError."""
    root, roadmap = project
    path = root / GATE_FILE
    path.write_text(text, encoding="utf-8")
    try:
        return load_gate_file(path, root, roadmap, ("cpu", "gpu", "dist"))
    except DefinitionError as error:
        assert error.problems, "a DefinitionError lists at least one problem"
        for problem in error.problems:
            assert problem.location.path == GATE_FILE and problem.location.line >= 1 and problem.location.column >= 1
        return error


# random documents -----------------------------------------------------------------------------------------------

KNOWN_KEYS = sorted(FILE_KEYS_REQUIRED | FILE_KEYS_OPTIONAL | GATE_KEYS_REQUIRED | GATE_KEYS_OPTIONAL
                    | {"input", "expect", "raises", "type", "match", "strategy", "max_examples", "note"})
WORDS = ["EXAMPLE-ROW", "M1", "EX-1.1", "EX-9.9", "cpu", "gpu", "tpu", "spec/example.md", "example_row.impl:page_bytes",
         "example_row.oracle:counted_page_bytes", "os:system", "ValueError", "[", "page-bytes", ""]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**20), st.floats(allow_nan=True),
                    st.sampled_from(WORDS), st.text(st.characters(blacklist_categories=("Cs",)), max_size=12))
keys = st.one_of(st.sampled_from(KNOWN_KEYS), st.text(st.characters(blacklist_categories=("Cs",)), max_size=8),
                 st.integers(-3, 3), st.booleans())
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)),
                      max_leaves=25)
gate_like = st.dictionaries(st.sampled_from(KNOWN_KEYS), values, max_size=8)
file_like = st.fixed_dictionaries({}, optional={
    "row": st.one_of(st.just("EXAMPLE-ROW"), scalars), "title": scalars, "spec": st.one_of(st.just("spec/example.md"), scalars),
    "sources": values, "gates": st.one_of(st.lists(st.one_of(gate_like, values), max_size=3), values), "notes": values})


@FUZZ
@given(document=st.one_of(values, file_like))
def test_loader_raises_only_definition_errors_on_random_documents(project, document):
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    outcome = load_text(project, text)
    assert isinstance(outcome, (GateFile, DefinitionError))


# random edits of the real file ----------------------------------------------------------------------------------

SAFE_ALPHABET = st.sampled_from(list("abcXYZ019 -_:.,[]{}#&*|>'\"?%@`\t\n") + ["  ", "- ", ": ", "~", "null", "&a ", "*a",
                                                                              "<<: ", "? ", "---\n", "...\n", "0x1F", ".inf"])


@st.composite
def edited(draw, alphabet=SAFE_ALPHABET):
    """The real gate file with one to three random edits: delete, insert or replace a span, or move a line."""
    text = REAL_TEXT
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["delete", "insert", "replace", "move-line", "indent"]))
        at = draw(st.integers(0, len(text)))
        if kind in ("delete", "replace"):
            end = draw(st.integers(at, min(len(text), at + 40)))
            piece = "" if kind == "delete" else "".join(draw(st.lists(alphabet, max_size=6)))
            text = text[:at] + piece + text[end:]
        elif kind == "insert":
            text = text[:at] + "".join(draw(st.lists(alphabet, min_size=1, max_size=6))) + text[at:]
        else:
            lines = text.split("\n")
            index = draw(st.integers(0, len(lines) - 1))
            if kind == "indent":
                lines[index] = " " * draw(st.integers(0, 9)) + lines[index].lstrip(" ")
            else:
                lines.insert(draw(st.integers(0, len(lines) - 1)), lines.pop(index))
            text = "\n".join(lines)
    return text


@FUZZ
@given(text=edited())
def test_loader_raises_only_definition_errors_on_edits_of_the_real_file(project, text):
    outcome = load_text(project, text)
    assert isinstance(outcome, (GateFile, DefinitionError))
    if text == REAL_TEXT:
        assert isinstance(outcome, GateFile)


def test_the_real_file_loads(project):
    gate_file = load_text(project, REAL_TEXT)
    assert isinstance(gate_file, GateFile)
    assert [g.id for g in gate_file.gates] == ["page-bytes"]


FULL_ALPHABET = st.one_of(SAFE_ALPHABET, st.characters(blacklist_categories=("Cs",)),
                          st.sampled_from(["!!int ", "!!float ", "!!timestamp ", "2020-13-45", "\x07", "\x00", "\ufeff"]))


def test_loader_raises_only_definition_errors_on_any_edit(project):
    """The same edits over every character and a few tags: crashes are collected, not raised inside hypothesis
    (a failing @given would shrink, and write a patch file into the checkout)."""
    crashes: dict[str, str] = {}

    @settings(FUZZ, phases=[Phase.explicit, Phase.generate])
    @given(text=edited(alphabet=FULL_ALPHABET))
    def probe(text):
        try:
            load_text(project, text)
        except Exception as error:  # noqa: BLE001 - any escape is the finding
            crashes.setdefault(f"{type(error).__module__}.{type(error).__name__}", text)

    probe()
    assert not crashes, "load_gate_file let through: " + ", ".join(sorted(crashes))


# hostile inputs: each must become a DefinitionError at file:line, never another exception ---------------------


@pytest.mark.parametrize("text", [
    pytest.param(REAL_TEXT.replace("title: Toy page bytes", "title: Toy\x07page bytes"), id="bell-character"),
    pytest.param(REAL_TEXT + "\x00", id="nul-byte"),
    pytest.param(REAL_TEXT.replace("title: Toy page bytes", "title: 2020-13-45"), id="impossible-date"),
    pytest.param(REAL_TEXT.replace("title: Toy page bytes", "title: !!int abc"), id="bad-int-tag"),
    pytest.param(REAL_TEXT.replace("title: Toy page bytes", "title: !!float abc"), id="bad-float-tag"),
    pytest.param(REAL_TEXT.replace("spec: spec/example.md", "spec: " + "s" * 300), id="spec-name-too-long"),
    pytest.param(REAL_TEXT.replace("spec: spec/example.md", "spec: spec/latin1.md"), id="spec-not-utf8"),
    pytest.param(REAL_TEXT.replace("title: Toy page bytes", "title: !!python/object:os.system x"), id="python-tag"),
    pytest.param(REAL_TEXT + "notes: &a [*a]\n", id="recursive-alias"),
    pytest.param(REAL_TEXT.replace("title: Toy page bytes", "title: 2020-01-01"), id="valid-date"),
    pytest.param("[" * 200, id="deep-nesting"),
    pytest.param("", id="empty"),
    pytest.param("a: 1\n---\nb: 2\n", id="two-documents"),
])
def test_loader_turns_hostile_input_into_a_definition_error(project, text):
    root, _ = project
    (root / "spec" / "latin1.md").write_bytes("- **EX-1.1** caf\xe9\n".encode("latin-1"))
    outcome = load_text(project, text)
    assert isinstance(outcome, DefinitionError)


def test_gates_list_reports_a_control_character_as_a_definition_error(example):
    example.edit("title: Toy page bytes", "title: Toy\x07page bytes")
    result = example.gates("list")
    assert result.code == 3
    assert f"{GATE_FILE}:2:" in result.err
