"""`gates diverge` end to end (docs/divergence.md) on a copy of the example project with a toy 3-layer "decoder"
(numpy: each layer y = x + tanh(x @ W_i)): a float64 oracle, a float32 port (only rounding: drift), a port with a
planted break in layer 1 (localized there), a dump replayed to the same table, and the usage errors."""
from __future__ import annotations

import json

import pytest

from _vllm_gates.taps.tap_dumps import read_dump
from tests.harness.conftest import GATE_FILE, Example

pytestmark = pytest.mark.cpu

TOY = '''"""A toy decoder with named taps: embed, per layer attn.in (a feed point), mlp.out and out, norm.in (a feed
point), norm.out and logits (float32)."""
import numpy as np


def _forward(config, weights, ids, dtype, feed=None, broken_layer=None):
    compute = np.dtype(dtype)
    feed = dict(feed or {})
    known = {f"layers.{i}.attn.in" for i in range(config["layers"])} | {"norm.in"}
    unknown = sorted(set(feed) - known)
    if unknown:
        raise ValueError(f"feed: unknown feed point {unknown[0]!r}")
    w = {name: np.asarray(value, dtype=compute) for name, value in weights.items()}
    taps = {}
    x = w["embed"][np.asarray(ids)]
    taps["embed"] = x
    for i in range(config["layers"]):
        if f"layers.{i}.attn.in" in feed:
            x = np.asarray(feed[f"layers.{i}.attn.in"], dtype=compute)
        taps[f"layers.{i}.attn.in"] = x
        matrix = w[f"layers.{i}.w"]
        mlp = np.tanh(x @ (matrix.T if i == broken_layer else matrix))
        taps[f"layers.{i}.mlp.out"] = mlp
        x = x + mlp
        taps[f"layers.{i}.out"] = x
    if "norm.in" in feed:
        x = np.asarray(feed["norm.in"], dtype=compute)
    taps["norm.in"] = x
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)
    taps["norm.out"] = y
    taps["logits"] = (y @ w["lm_head"]).astype(np.float32)
    return taps


def oracle(config, weights, ids, dtype, feed=None):
    return _forward(config, weights, ids, "float64", feed)


def port(config, weights, ids, dtype, feed=None):
    return _forward(config, weights, ids, dtype, feed)


def port_broken_layer1(config, weights, ids, dtype, feed=None):
    return _forward(config, weights, ids, dtype, feed, broken_layer=1)
'''

CASE = """
      {name}:
        input:
          config: {{layers: 3}}
          weights:
            embed: {{tensor: {{randn: {{shape: [16, 8], dtype: float64, seed: 1}}}}}}
            layers.0.w: {{tensor: {{randn: {{shape: [8, 8], dtype: float64, seed: 2, scale: 0.5}}}}}}
            layers.1.w: {{tensor: {{randn: {{shape: [8, 8], dtype: float64, seed: 3, scale: 0.5}}}}}}
            layers.2.w: {{tensor: {{randn: {{shape: [8, 8], dtype: float64, seed: 4, scale: 0.5}}}}}}
            lm_head: {{tensor: {{randn: {{shape: [8, 16], dtype: float64, seed: 5}}}}}}
          ids: {{tensor: {{dtype: int64, shape: [4], values: {ids}}}}}
          dtype: float32"""

GATE = '''
  - id: toy-taps
    milestone: M1
    covers: [EX-1.1]
    markers: [cpu]
    impl: example_row.toy_decoder:port
    oracle: example_row.toy_decoder:oracle
    compare: {policy: allclose, rtol: 1.0e-4, atol: 1.0e-5}
    taps:
      feed: feed
      feed_points: ["layers.{i}.attn.in", "norm.in"]
      layer: "layers.{i}."
      logits: logits
    cases:''' + CASE.format(name="four-tokens", ids=[1, 5, 2, 7]) + CASE.format(name="other-ids", ids=[3, 3, 0, 9]) + "\n"


def toy(example: Example) -> Example:
    example.write("example_row/toy_decoder.py", TOY)
    example.write(GATE_FILE, example.read() + GATE)
    return example


def table_lines(text: str) -> list[str]:
    """The per-tap rows of the printed table (the lines between the heading and the classification)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("tap "))
    end = lines.index("", start)
    return lines[start + 1:end]


def test_a_planted_break_in_layer_1_is_localized_there_and_exits_1(example: Example) -> None:
    toy(example).edit("impl: example_row.toy_decoder:port\n", "impl: example_row.toy_decoder:port_broken_layer1\n")
    report = example.root / "out" / "diverge.json"
    result = example.gates("diverge", "EXAMPLE-ROW", "--gate", "toy-taps", "--json", str(report))
    assert result.code == 1, result.text
    assert "LOCALIZED BREAK at layer 1, tap layers.1.mlp.out" in result.out
    found = json.loads(report.read_text())
    assert found["classification"]["kind"] == "localized break"
    assert (found["classification"]["layer"], found["classification"]["tap"]) == (1, "layers.1.mlp.out")
    assert found["exit_code"] == 1 and found["case"] == "four-tokens"
    taps = {tap["name"]: tap for tap in found["taps"]}
    assert list(taps)[:3] == ["embed", "layers.0.attn.in", "layers.0.mlp.out"]  # forward order, as the reference reports
    assert all(taps[name]["isolated"]["passed"] for name in ("embed", "layers.0.mlp.out", "layers.0.out"))
    assert taps["layers.1.mlp.out"]["verdict"] == "BREAK"
    # teacher-forced, layer 2 reads the reference's residual stream: its own error is small again
    assert taps["layers.2.mlp.out"]["isolated"]["passed"]
    assert taps["layers.2.mlp.out"]["accumulated"]["max_abs"] > 100 * taps["layers.2.mlp.out"]["isolated"]["max_abs"]
    assert "mismatched" in result.out  # the numeric gates' report of the break


def test_a_float32_port_of_a_float64_oracle_is_drift_and_exits_0(example: Example) -> None:
    result = toy(example).gates("diverge", "EXAMPLE-ROW", "--gate", "toy-taps")
    assert result.code == 0, result.text
    assert "DRIFT, no localized break" in result.out
    assert "LOCALIZED BREAK" not in result.out
    rows = table_lines(result.out)
    assert len(rows) == 1 + 3 * 3 + 3  # embed, three taps per layer, norm.in, norm.out, logits
    assert all(row.split()[-1] in ("ok", "fed") for row in rows), rows
    assert "logits: the argmax agrees at all 4 positions" in result.out


def test_a_dump_replays_to_the_same_table(example: Example) -> None:
    toy(example)
    dump = example.root / "out" / "oracle.safetensors"
    dump.parent.mkdir(exist_ok=True)
    live = example.gates("diverge", "EXAMPLE-ROW", "--gate", "toy-taps", "--dump", str(dump))
    assert live.code == 0, live.text
    replayed = example.gates("diverge", "EXAMPLE-ROW", "--gate", "toy-taps", "--against", str(dump))
    assert replayed.code == 0, replayed.text
    assert table_lines(replayed.out) == table_lines(live.out)
    assert replayed.out.split("\n", 1)[1] == live.out.split("\n", 1)[1]  # all but the title, which names the reference
    assert f"against dump {dump}" in replayed.out
    # the same dump, another case: refused, naming both ids
    refused = example.gates("diverge", "EXAMPLE-ROW", "--gate", "toy-taps", "--case", "other-ids", "--against", str(dump))
    assert refused.code == 3, refused.text
    assert "recorded on ids [1, 5, 2, 7], the case has ids [3, 3, 0, 9]" in refused.err


@pytest.mark.parametrize("args, said", [
    (("EXAMPLE-RO", "--gate", "toy-taps"), "ROW EXAMPLE-RO: not a row of the roadmap; did you mean 'EXAMPLE-ROW'?"),
    (("EXAMPLE-ROW", "--gate", "toy-tap"), "--gate toy-tap: row EXAMPLE-ROW has no such gate; did you mean 'toy-taps'?"),
    (("EXAMPLE-ROW", "--gate", "page-bytes"), "--gate page-bytes: the gate declares no `taps:`"),
    (("EXAMPLE-ROW", "--gate", "toy-taps", "--case", "four-token"),
     "--case four-token: gate toy-taps has no such case; did you mean 'four-tokens'?"),
    (("EXAMPLE-ROW", "--gate", "toy-taps", "--impl", "cpp"), "--impl"),
    (("EXAMPLE-ROW", "--gate", "toy-taps", "--against", "nowhere.safetensors"), "--against nowhere.safetensors: no such file"),
    (("EXAMPLE-ROW", "--gate", "toy-taps", "--against", "not a target"), "--against not a target: expected `oracle`"),
])
def test_usage_errors_exit_2_naming_the_flag(example: Example, args: tuple[str, ...], said: str) -> None:
    result = toy(example).gates("diverge", *args)
    assert result.code == 2, result.text
    assert said in result.err


def test_a_reference_that_raises_is_an_error_never_a_pass(example: Example) -> None:
    toy(example).edit("    return _forward(config, weights, ids, \"float64\", feed)",
                      "    raise RuntimeError(\"the reference broke\")", "example_row/toy_decoder.py")
    result = example.gates("diverge", "EXAMPLE-ROW", "--gate", "toy-taps")
    assert result.code == 3, result.text
    assert "the reference example_row.toy_decoder:oracle raised RuntimeError: the reference broke" in result.err


def test_a_port_that_lacks_a_tap_is_an_error_listing_what_each_side_reports(example: Example) -> None:
    toy(example).edit("    return _forward(config, weights, ids, dtype, feed)\n",
                      "    taps = _forward(config, weights, ids, dtype, feed)\n    del taps['norm.out']\n    return taps\n",
                      "example_row/toy_decoder.py")
    dump = example.root / "oracle.safetensors"
    result = example.gates("diverge", "EXAMPLE-ROW", "--gate", "toy-taps", "--dump", str(dump))
    assert result.code == 3, result.text
    assert "the implementation's free-running run lacks norm.out (the reference reports embed, layers.0.attn.in" in result.err
    assert "norm.out" in read_dump(dump).taps  # the reference was recorded before the implementation ran


def test_an_external_implementation_needs_the_gate_to_name_an_operation(example: Example) -> None:
    toy(example).write("pyproject.toml", example.read("pyproject.toml").replace("[tool.pytest.ini_options]", (
        '[tool.vllm-gates.implementations.fake]\ncommand = ["fake-worker"]\n\n[tool.pytest.ini_options]')))
    result = example.gates("diverge", "EXAMPLE-ROW", "--gate", "toy-taps", "--impl", "fake")
    assert result.code == 2, result.text
    assert ("--impl fake: gate toy-taps names a Python target, not an operation of the row, so only the python "
            "implementation can answer it") in result.err
