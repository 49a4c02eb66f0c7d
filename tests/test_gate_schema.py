"""The published JSON Schema and the loader agree: real gate files pass both, malformed shapes fail both."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from _vllm_gates.base.errors import DefinitionError
from _vllm_gates.definitions.gatefile import load_gate_file
from _vllm_gates.definitions.roadmap import load_roadmap

jsonschema = pytest.importorskip("jsonschema")
pytestmark = pytest.mark.cpu

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "tests" / "example_project"
SCHEMA = json.loads((REPO / "src" / "_vllm_gates" / "definitions" / "schema" / "gate-file.schema.json").read_text())
GATE_FILES = sorted((REPO / "gates" / "rows").glob("*/gate.yaml")) + sorted((REPO / "gates" / "rows").glob("*/m[0-9].yaml")) + \
    [EXAMPLE / "gates" / "rows" / "example" / "gate.yaml"]


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("path", GATE_FILES, ids=lambda p: p.parent.name)
def test_every_gate_file_in_the_repository_validates_against_the_schema(path: Path) -> None:
    jsonschema.validate(yaml.safe_load(path.read_text()), SCHEMA)


MALFORMED = {
    "unknown-top-key": lambda d: d.update(owner="someone"),
    "unknown-gate-key": lambda d: d["gates"][0].update(markerz=["cpu"]),
    "marker-not-a-list": lambda d: d["gates"][0].update(markers="cpu"),
    "unknown-marker": lambda d: d["gates"][0].update(markers=["tpu"]),
    "target-without-colon": lambda d: d["gates"][0].update(impl="example_row.impl.page_bytes"),
    "expect-and-raises": lambda d: d["gates"][0]["cases"]["fp16-page"].update(raises={"type": "ValueError"}),
    "max-examples-text": lambda d: d["gates"][0]["properties"].update(max_examples="ten"),
    "no-gates": lambda d: d.update(gates=[]),
    "gate-without-checks": lambda d: [d["gates"][0].pop("cases"), d["gates"][0].pop("properties")],
    "bad-requirement-id": lambda d: d["gates"][0].update(covers=["ex-1"]),
    "input-not-a-mapping": lambda d: d["gates"][0]["cases"]["fp16-page"].update(input=[32000]),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_shapes_are_refused_by_schema_and_loader(name: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project)
    gate_path = project / "gates" / "rows" / "example" / "gate.yaml"
    document = yaml.safe_load(gate_path.read_text())
    MALFORMED[name](document)
    gate_path.write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, SCHEMA)
    roadmap = load_roadmap(project / "spec" / "roadmap.yaml")
    with pytest.raises(DefinitionError) as error:
        load_gate_file(gate_path, project, roadmap, ("cpu", "gpu", "dist"))
    assert "gates/rows/example/gate.yaml:" in str(error.value)
