"""A gate's `taps:` key (docs/gate-files.md, "Taps of a model gate"): read into model.Taps; every mistake a
definition error at its file:line naming the key and the value; the JSON schema agrees."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from _vllm_gates.base.errors import DefinitionError
from _vllm_gates.definitions.gatefile import load_gate_file
from _vllm_gates.definitions.roadmap import load_roadmap
from tests.harness.conftest import EXAMPLE, GATE_FILE, line_of

jsonschema = pytest.importorskip("jsonschema")
pytestmark = pytest.mark.cpu

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "src" / "_vllm_gates" / "definitions" / "schema" / "gate-file.schema.json").read_text())
TAPS = '''    taps:
      feed: feed
      feed_points: ["layers.{i}.attn.in", "layers.{i}.mlp.in", "norm.in"]
      layer: "layers.{i}."
      logits: logits
'''
COMPARE = "    compare: {policy: nmse, max: 1.0e-6}\n"


def load(tmp_path: Path, taps: str = TAPS, compare: str = COMPARE, oracle: bool = True):
    """The example's gate file with ``compare`` and ``taps`` added to its gate; (the loaded file or the error, text)."""
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    path = project / GATE_FILE
    text = path.read_text().replace("    cases:\n", compare + taps + "    cases:\n", 1)
    if not oracle:
        text = text.replace("    oracle: example_row.oracle:counted_page_bytes\n", "").replace(
            "    properties:\n      strategy: .strategies:geometries\n      max_examples: 50\n", "")
    path.write_text(text)
    roadmap = load_roadmap(project / "spec" / "roadmap.yaml")
    try:
        return load_gate_file(path, project, roadmap, ("cpu", "gpu", "dist")), text
    except DefinitionError as error:
        return error, text


def test_taps_are_read_into_the_gate(tmp_path: Path) -> None:
    loaded, text = load(tmp_path)
    assert not isinstance(loaded, DefinitionError), loaded
    taps = loaded.gates[0].taps
    assert taps is not None
    assert (taps.feed, taps.layer, taps.logits) == ("feed", "layers.{i}.", "logits")
    assert taps.feed_points == ("layers.{i}.attn.in", "layers.{i}.mlp.in", "norm.in")
    assert taps.location.line == line_of(text, "    taps:")
    assert taps.is_feed_point("layers.12.mlp.in") and taps.is_feed_point("norm.in")
    assert not taps.is_feed_point("layers.1.mlp.out") and not taps.is_feed_point("layers.x.mlp.in")
    assert (taps.layer_of("layers.12.attn.k"), taps.layer_of("norm.out"), taps.layer_of("layers.out")) == (12, None, None)
    jsonschema.validate(yaml.safe_load(text), SCHEMA)


@pytest.mark.parametrize("taps, needle, key, said", [
    (TAPS.replace('"layers.{i}.mlp.in"', '"layers.mlp.in"'), "feed_points:", "gates[0].taps.feed_points[1]",
     "pattern 'layers.mlp.in' names a point inside the layers ('layers.{i}.') without the layer index {i}"),  # loader only
    (TAPS.replace('layer: "layers.{i}."', 'layer: "layers."'), "layer: ", "gates[0].taps.layer",
     "pattern 'layers.' must hold the layer index {i} exactly once (it holds it 0 times)"),
    (TAPS.replace("logits: logits", "logits: logits.{i}"), "logits: ", "gates[0].taps.logits",
     "'logits.{i}' names one tap: it holds no layer index {i}"),
    (TAPS.replace('feed_points: ["layers.{i}.attn.in", "layers.{i}.mlp.in", "norm.in"]', "feed_points: []"), "feed_points:",
     "gates[0].taps.feed_points", "an empty list: name at least one feed point"),
    (TAPS + "      probes: [embed]\n", "probes:", "gates[0].taps.probes",
     "unknown key 'probes' (allowed: feed, feed_points, layer, logits, rank)"),
    (TAPS + '      rank: ".rank"\n', "rank: ", "gates[0].taps.rank",
     "suffix '.rank' must hold the rank index {r} exactly once (it holds it 0 times)"),
    (TAPS + '      rank: ".rank{i}"\n', "rank: ", "gates[0].taps.rank", "value '.rank{i}' is not text matching"),
    (TAPS.replace("      feed: feed\n", ""), "feed_points:", "gates[0].taps.feed", "required key is missing"),
    (TAPS.replace('"norm.in"]', '"norm.{j}"]'), "feed_points:", "gates[0].taps.feed_points[2]",
     "pattern 'norm.{j}' has a brace that is not the layer index {i}"),
    (TAPS.replace("feed: feed", "feed: 2"), "feed: 2", "gates[0].taps.feed", "expected a non-empty string, got int 2"),
])
def test_each_mistake_is_a_definition_error_at_its_line_naming_key_and_value(tmp_path: Path, taps: str, needle: str,
                                                                              key: str, said: str) -> None:
    loaded, text = load(tmp_path, taps)
    assert isinstance(loaded, DefinitionError), "the loader accepted it"
    problems = [p for p in loaded.problems if p.key == key]
    assert problems, [str(p) for p in loaded.problems]
    assert said in problems[0].message
    assert problems[0].location.line == line_of(text, needle)
    if "layers.mlp.in" not in taps:  # the schema cannot relate a feed point to the `layer` pattern; the loader does
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(yaml.safe_load(text), SCHEMA)


def test_a_rank_suffix_names_the_ranks_partials_of_a_reduced_tap(tmp_path: Path) -> None:
    loaded, text = load(tmp_path, TAPS + '      rank: ".rank{r}"\n')
    assert not isinstance(loaded, DefinitionError), loaded
    taps = loaded.gates[0].taps
    assert taps is not None and taps.rank == ".rank{r}"
    assert taps.partial_name("layers.2.attn.out", 1) == "layers.2.attn.out.rank1"
    assert taps.partial_of("layers.2.attn.out.rank13") == ("layers.2.attn.out", 13)
    assert taps.partial_of("layers.2.attn.out") is None and taps.partial_of(".rank1") is None
    assert load(tmp_path / "none")[0].gates[0].taps.partial_of("layers.2.attn.out.rank1") is None  # no suffix declared
    jsonschema.validate(yaml.safe_load(text), SCHEMA)


def test_a_gate_with_taps_needs_a_compare_policy_with_a_tolerance(tmp_path: Path) -> None:
    for compare, named in (("", "no compare policy"), ("    compare: {policy: exact}\n", "policy 'exact', which has no tolerance")):
        loaded, text = load(tmp_path / named.split()[0], compare=compare)
        assert isinstance(loaded, DefinitionError)
        problem = next(p for p in loaded.problems if p.key == "gates[0].taps")
        assert "needs a `compare:` policy with a tolerance" in problem.message and named in problem.message
        assert problem.location.line == line_of(text, "    taps:")


def test_a_gate_with_taps_needs_an_oracle(tmp_path: Path) -> None:
    loaded, text = load(tmp_path, oracle=False)
    assert isinstance(loaded, DefinitionError)
    problem = next(p for p in loaded.problems if p.key == "gates[0].taps")
    assert "a gate with `taps:` needs an `oracle`" in problem.message
