"""The divergence section of `gates report --html` in headless chromium (docs/divergence.md), made from real
`gates diverge --json` reports of the MODEL-TAPS row: the per-layer plot renders, each layer's points sit where the
report's numbers put them on the log scale, the break marker stands at the known-bad's planted layer, and the port's
drift report has no break marker. Skipped, saying why, where chromium is not installed."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from _vllm_gates.frontends import cli
from gates.rows.model_taps import known_bad
from tests.chromium import browser, console_errors  # noqa: F401 - browser: the fixture

pytestmark = pytest.mark.cpu

ROOT = Path(__file__).resolve().parents[2]
CASE = "four-layers-8-tokens"
PLANTED = known_bad.PLANTED_LAYER
GEOMETRY = """return Array.from(arguments[0].querySelectorAll(arguments[1])).map(function (e) {
  var r = e.getBoundingClientRect();
  return {cls: e.getAttribute('class'), layer: e.getAttribute('data-layer'), decade: e.getAttribute('data-decade'),
          tap: e.getAttribute('data-tap'), x: r.left + r.width / 2, y: r.top + r.height / 2, w: r.width, h: r.height};
});"""


@pytest.fixture(scope="module")
def reports(browser, tmp_path_factory) -> tuple[Path, dict[str, Any], dict[str, Any]]:  # noqa: F811 - the fixture
    """The page of two real reports: the k-v-swapped known-bad (a break at the planted layer) and the port (drift)."""
    folder = tmp_path_factory.mktemp("diverge-page")
    broken, drift, page = folder / "k-v-swapped.json", folder / "port.json", folder / "report.html"
    diverge = ["--root", str(ROOT), "diverge", "MODEL-TAPS", "--gate", "decoder-taps", "--case", CASE]
    assert cli.main([*diverge, "--known-bad", "k-v-swapped", "--json", str(broken)]) == 1
    assert cli.main([*diverge, "--json", str(drift)]) == 0
    assert cli.main(["--root", str(ROOT), "report", "--html", str(page), "--diverge", str(broken),
                     "--diverge", str(drift)]) == 0
    return page, json.loads(broken.read_text(encoding="utf-8")), json.loads(drift.read_text(encoding="utf-8"))


def worst_per_layer(report: dict[str, Any], comparison: str) -> dict[str, float]:
    """From the report's own numbers: each layer's largest share of the tolerance used (isolated: feed points aside,
    they hold what was fed)."""
    found: dict[str, float] = {}
    for tap in report["taps"]:
        if tap["layer"] is None or (comparison == "isolated" and tap["feed_point"]):
            continue
        layer = str(tap["layer"])
        found[layer] = max(found.get(layer, 0.0), float(tap[comparison]["used"]))
    return found


def geometry(driver: Any, section: Any, selector: str) -> list[dict[str, Any]]:
    return driver.execute_script(GEOMETRY, section, selector)


def check_points_sit_on_the_log_scale(driver: Any, section: Any, report: dict[str, Any]) -> dict[str, Any]:
    """Each layer's isolated and accumulated point, where it rendered, against the report's numbers: on the line
    through the rendered decade ticks, so larger shares sit higher; returns the rendered points and tolerance."""
    ticks = {int(t["decade"]): t["y"] for t in geometry(driver, section, "line.tick")}
    low, high = min(ticks), max(ticks)
    assert high - low >= 2 and ticks[high] < ticks[low], ticks
    per_decade = (ticks[low] - ticks[high]) / (high - low)
    tolerance = geometry(driver, section, "line.tolerance")
    assert len(tolerance) == 1 and abs(tolerance[0]["y"] - ticks[0]) < 0.5, "the tolerance line is at 1"
    shown = {}
    for comparison in ("isolated", "accumulated"):
        circles = {c["layer"]: c for c in geometry(driver, section, f"circle.{comparison}") if c["layer"] is not None}
        expected = worst_per_layer(report, comparison)
        assert sorted(circles) == sorted(expected) == [str(i) for i in range(4)], (comparison, circles, expected)
        for layer, used in expected.items():
            assert used > 0, (comparison, layer, used)
            y = ticks[low] - (math.log10(used) - low) * per_decade
            assert abs(circles[layer]["y"] - y) < 1.0, (comparison, layer, used, circles[layer]["y"], y)
            assert circles[layer]["w"] > 0 and circles[layer]["h"] > 0
        ranked = sorted(expected, key=expected.get)  # larger share, higher on the page: smaller y
        assert [circles[layer]["y"] for layer in ranked] == sorted((circles[layer]["y"] for layer in ranked), reverse=True)
        shown[comparison] = circles
    shown["tolerance"] = tolerance[0]["y"]
    return shown


def test_the_plot_renders_its_points_where_the_report_says_and_marks_the_planted_layer(browser, reports):  # noqa: F811
    from selenium.webdriver.common.by import By

    page, broken, drift = reports
    assert broken["classification"]["layer"] == PLANTED and drift["classification"]["kind"] == "drift"
    browser.get(page.as_uri())
    sections = browser.find_elements(By.CSS_SELECTOR, "section.diverge")
    assert len(sections) == 2
    for section in sections:
        plot = section.find_element(By.CSS_SELECTOR, "svg.layer-plot")
        assert plot.is_displayed() and plot.size["width"] > 500 and plot.size["height"] > 250

    shown = check_points_sit_on_the_log_scale(browser, sections[0], broken)
    markers = geometry(browser, sections[0], "g.break-marker line")
    assert len(markers) == 1
    assert sections[0].find_element(By.CSS_SELECTOR, "g.break-marker").get_attribute("data-layer") == str(PLANTED)
    for layer, circle in shown["isolated"].items():  # the marker stands at the planted layer's points, and only there
        at_marker = abs(circle["x"] - markers[0]["x"]) < 0.5
        assert at_marker == (layer == str(PLANTED)), (layer, circle["x"], markers[0]["x"])
        above = circle["y"] < shown["tolerance"]  # only the planted layer's own error is over its tolerance
        assert above == (layer == str(PLANTED)), (layer, circle, shown["tolerance"])
    assert all((c["y"] < shown["tolerance"]) == (int(layer) >= PLANTED) for layer, c in shown["accumulated"].items())
    classification = sections[0].find_element(By.CSS_SELECTOR, "p.classification").text
    assert classification.startswith(f"LOCALIZED BREAK at layer {PLANTED}, tap layers.{PLANTED}.attn.k")
    row = sections[0].find_element(By.CSS_SELECTOR, "table.taps tr.break")
    assert row.text.startswith(f"layers.{PLANTED}.attn.k") and row.text.endswith("BREAK")
    first = broken["first_divergence"]
    said = sections[0].find_element(By.CSS_SELECTOR, "p.first-divergence").text
    assert (f"first divergent position {first['position']} of {first['positions']}: reference id "
            f"{first['reference_id']}, implementation id {first['impl_id']}") in said
    assert f"top-2 margin there is {first['margin']:.3g}, {first['judged']}" in said

    shown = check_points_sit_on_the_log_scale(browser, sections[1], drift)
    assert geometry(browser, sections[1], "g.break-marker") == []
    assert drift["classification"]["tap"] is None and geometry(browser, sections[1], "g.crossing-marker") == []
    assert all(c["y"] > shown["tolerance"] for series in ("isolated", "accumulated") for c in shown[series].values())
    assert sections[1].find_element(By.CSS_SELECTOR, "p.classification").text.startswith("DRIFT, no localized break")
    assert console_errors(browser) == []
