"""`gates report --html --diverge F` (docs/divergence.md): a diverge report's section (classification, first divergence,
dtype boundaries, per-layer plot, per-tap table) from reports the localization really writes on synthetic taps; a file
that is not a diverge report refused naming it; hostile and malformed values escaped or blank, never a traceback."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from _vllm_gates.frontends import cli
from _vllm_gates.taps.divergence import localize
from _vllm_gates.taps.divergence_page import DivergeReport, diverge_section
from _vllm_gates.taps.divergence_plot import LOG_BOTTOM, LOG_TOP, NOT_FINITE_Y, ZERO_Y, LogScale, groups, svg
from _vllm_gates.taps.divergence_report import as_json
from tests.harness.test_divergence import POLICY, TAPS, logits_case, names, noisy, reference
from tests.harness.test_html_report import _unbalanced

pytestmark = pytest.mark.cpu

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
CONTEXT = {"row": "TOY", "gate": "toy-taps", "case": "c", "impl": "python", "reference": "oracle toy", "exit_code": 0}


def broken_at_layer_2() -> dict[str, Any]:
    ref = reference()
    forced = noisy(ref, 1e-7)
    forced["layers.2.mlp.out"] = (ref["layers.2.mlp.out"] + 0.5).astype(np.float32)
    free = noisy(ref, {name: 0.1 for name in names()[names().index("layers.2.mlp.out"):]})
    return as_json(localize(ref, free, forced, TAPS, POLICY), {**CONTEXT, "exit_code": 1})


def drifting() -> dict[str, Any]:
    ref = reference()
    free = noisy(ref, {name: 1e-7 * 10 ** (position / 6) for position, name in enumerate(names())}, seed=2)
    return as_json(localize(ref, free, noisy(ref, 1e-7), TAPS, POLICY), CONTEXT)


def section(document: dict[str, Any]) -> str:
    return diverge_section(DivergeReport("r.json", document), 0)


def marker(page: str, kind: str) -> list[str]:
    return re.findall(rf'<g class="{kind}" data-tap="([^"]*)"(?: data-layer="(\d+)")?', page)


def test_a_break_is_marked_at_its_layer_its_tap_and_its_table_row() -> None:
    document = broken_at_layer_2()
    page = section(document)
    assert marker(page, "break-marker") == [("layers.2.mlp.out", "2")] and marker(page, "crossing-marker") == []
    assert "<b>LOCALIZED BREAK</b> at layer 2, tap <code>layers.2.mlp.out</code>" in page
    assert '<tr class="break"><td><code>layers.2.mlp.out</code>' in page and page.count('<tr class="break">') == 1
    assert "<th>mismatched</th><td>80 of 80 elements</td>" in page  # the numeric gates' report of the break
    assert page.count("<tr><td><code>") + 1 == len(names())  # a table line per tap


def test_drift_marks_where_the_accumulated_error_crosses_and_no_break() -> None:
    document = drifting()
    crossing = document["classification"]
    assert crossing["kind"] == "drift" and crossing["tap"] is not None
    page = section(document)
    assert marker(page, "break-marker") == []
    assert marker(page, "crossing-marker") == [(crossing["tap"], str(crossing["layer"]) if crossing["layer"] is not None else "")]
    assert f"first crosses the bound at <code>{crossing['tap']}</code>" in page


def test_the_first_divergence_with_its_margin_and_a_confident_one_without_a_break() -> None:
    ref, free = logits_case(margin=1.0)
    document = as_json(localize(ref, free, noisy(ref, 1e-7), TAPS, POLICY), CONTEXT)
    page = section(document)
    assert ("first divergent position <b>2</b> of 5: reference id <b>3</b>, implementation id <b>7</b>; the reference's "
            "top-2 margin there is <span class=\"margin\">1</span>, <span class=\"judged confident\">confident</span> "
            "(the band is 2e-05, 2 x atol 1e-05 for float32)") in page.replace("&#x27;", "'")
    assert '<p class="confident-without-break">' in page
    near_ref, near_free = logits_case(margin=1e-5)
    near = section(as_json(localize(near_ref, near_free, noisy(near_ref, 1e-7), TAPS, POLICY), CONTEXT))
    assert '<span class="judged near-tie">near-tie</span>' in near and "confident-without-break" not in near


def test_dtype_boundaries_wider_with_their_bytes_and_narrower_as_a_likely_break() -> None:
    ref = {name: value.astype(np.float32) for name, value in reference().items()}
    port = {name: value.astype(ml_dtypes.bfloat16 if name == "layers.1.out" else np.float32) for name, value in ref.items()}
    port["layers.0.out"] = ref["layers.0.out"].astype(np.float64)
    page = section(as_json(localize(ref, port, port, TAPS, POLICY), CONTEXT))
    assert ('<li class="wider"><code>layers.0.out</code>: float64 where the reference has float32: 320 bytes more</li>'
            in page)
    assert ('<li class="narrower"><code>layers.1.out</code>: bfloat16 where the reference has float32: <b>likely break</b>'
            in page)
    assert "none: every tap has the reference" in section(drifting())


def test_points_sit_on_the_log_scale_zero_and_non_finite_on_their_rows() -> None:
    document = broken_at_layer_2()
    document["taps"][names().index("layers.3.mlp.out")]["accumulated"]["used"] = "inf"
    found = groups(document["taps"])
    assert [group.label for group in found] == ["embed", "0", "1", "2", "3", "norm.in…"]
    assert found[-1].taps == ("norm.in", "norm.out", "logits") and found[0].accumulated.used == 0.0  # embed: free-running exact
    page = svg(found, "layers.2.mlp.out", None)
    circles = {(series, group): float(cy) for series, group, cy in
               re.findall(r'<circle class="point (\w+)" data-group="(\d+)".*?cy="([\d.]+)"', page)}
    assert circles[("accumulated", "0")] == ZERO_Y and circles[("accumulated", "4")] == NOT_FINITE_Y
    for group in found[1:4]:  # each layer's isolated point: the worst non-feed tap of the layer, on the log line
        index = str(found.index(group))
        worst = max(tap["isolated"]["used"] for tap in document["taps"] if tap["layer"] == group.layer and not tap["feed_point"])
        scale = LogScale(int(re.search(r'data-low-decade="(-?\d+)"', page)[1]), int(re.search(r'data-high-decade="(-?\d+)"', page)[1]))
        expected = LOG_BOTTOM - (math.log10(worst) - scale.low) / (scale.high - scale.low) * (LOG_BOTTOM - LOG_TOP)
        assert circles[("isolated", index)] == pytest.approx(expected, abs=0.01)
    scale = LogScale(-4, 2)
    assert scale.y(1e-4) == LOG_BOTTOM and scale.y(1e2) == LOG_TOP and scale.y(1e-3) > scale.y(1e-2) > scale.y(1.0)
    assert scale.y(float("nan")) == NOT_FINITE_Y and scale.y(0.0) == ZERO_Y


def test_hostile_and_malformed_values_are_escaped_or_blank() -> None:
    document = broken_at_layer_2()
    document["impl"] = "<script>alert(1)</script>"
    document["taps"][1]["name"] = "<img src=x onerror=alert(1)>"
    document["taps"][2]["isolated"] = "not an object"
    document["taps"][3]["layer"] = "2"
    document["classification"]["report"] = [["<b>", "</table>"], "junk", [1]]
    document["first_divergence"] = ["not", "an", "object"]
    document["dtype_boundaries"] = {"tap": "x"}
    page = section(document)
    assert "<script>alert" not in page and "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<th>&lt;b&gt;</th><td>&lt;/table&gt;</td>" in page
    assert _unbalanced(page) == []


def _report(tmp_path: Path, *diverge: str) -> tuple[int, str, str]:
    out = tmp_path / "report.html"
    code = cli.main(["--root", str(ROOT), "report", "--html", str(out), *[f"--diverge={name}" for name in diverge]])
    return code, out.read_text(encoding="utf-8") if out.exists() else "", str(out)


def test_the_page_takes_diverge_reports_as_sections(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken, drift = tmp_path / "broken.json", tmp_path / "drift.json"
    broken.write_text(json.dumps(broken_at_layer_2()), encoding="utf-8")
    drift.write_text(json.dumps(drifting()), encoding="utf-8")
    code, page, _ = _report(tmp_path, str(broken), str(drift))
    assert code == 0 and page.count('<section id="diverge-') == 2 and page.count('<svg class="layer-plot"') == 2
    assert f"diverge: {broken}; diverge: {drift})" in capsys.readouterr().out
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page), "the page fetches nothing"
    assert _unbalanced(page) == []


@pytest.mark.parametrize("content, said", [
    (None, "does not exist"),
    ("{not json", "is not JSON"),
    ("[1, 2]", "is not a `gates diverge --json` report: it holds a JSON list, expected format 'vllm-gates/diverge/1'"),
    ("RUN", "is not a `gates diverge --json` report: its schema is 'vllm-gates/run/3', expected format"),
    ('{"format": "vllm-gates/diverge/1", "taps": [], "classification": {}}', 'its "taps" is not a non-empty list of taps (list of 0)'),
    ('{"format": "vllm-gates/diverge/1", "taps": [{"name": "a"}]}', 'its "classification" is not an object (absent)'),
])
def test_a_file_that_is_not_a_diverge_report_is_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  content: str | None, said: str) -> None:
    given = tmp_path / "given.json"
    if content is not None:
        given.write_text((DATA / "run-report.json").read_text(encoding="utf-8") if content == "RUN" else content,
                         encoding="utf-8")
    code, _, out = _report(tmp_path, str(given))
    assert code == 2 and not Path(out).exists()
    err = capsys.readouterr().err
    assert f"gates: error: --diverge {given} {said}" in err or f"gates: error: --diverge {given}: {said}" in err, err


def test_a_classification_naming_a_tap_the_report_lacks_is_said_and_marks_nothing() -> None:
    document = broken_at_layer_2()
    document["classification"]["tap"] = "layers.9.mlp.out"
    page = section(document)
    assert "the classification names tap layers.9.mlp.out, which is not among the report's taps" in page
    assert marker(page, "break-marker") == [] and '<tr class="break">' not in page
