"""The HTML report in a real headless browser (issue 28 item 7): Debian's chromium driven through its chromedriver
(ci/install-system-deps.sh installs both): the page loads from file:// with no console error, every row expands,
the kill matrix renders coloured cells, survivors show their diffs. Skipped only where no chromium is installed."""
from __future__ import annotations

from pathlib import Path

import pytest

from _vllm_gates.frontends import cli
from tests.chromium import browser, console_errors  # noqa: F401 - browser: the fixture

pytestmark = pytest.mark.cpu

DATA = Path(__file__).parent / "data"


def test_the_page_loads_expands_and_renders_in_chromium(browser, tmp_path):
    from selenium.webdriver.common.by import By

    page = tmp_path / "report.html"
    assert cli.main(["report", "--html", str(page), "--run", str(DATA / "run-report.json"),
                     "--mutation", str(DATA / "mutation-report.json")]) == 0
    browser.get(page.as_uri())
    assert browser.title == "vllm-gates report"
    rows = browser.find_elements(By.CSS_SELECTOR, "details.row")
    assert len(rows) == 2
    for row in rows:  # each row opens on a click of its summary
        assert row.get_attribute("open") is None
        row.find_element(By.TAG_NAME, "summary").click()
        assert row.get_attribute("open") is not None
    browser.find_element(By.ID, "expand").click()  # the page's own script opens every <details>
    for row in rows:
        assert row.get_attribute("open") is not None
        assert row.find_element(By.CSS_SELECTOR, "details.milestone").is_displayed()
        assert row.find_element(By.CSS_SELECTOR, "details.gate summary").is_displayed()
    kills = browser.find_elements(By.CSS_SELECTOR, "table.matrix td.c-k")
    assert len(kills) == 16 and all(k.is_displayed() for k in kills)
    colours = {k.value_of_css_property("background-color") for k in kills}
    assert colours == {"rgba(200, 40, 40, 1)"}, colours
    heat = browser.find_elements(By.CSS_SELECTOR, "table.matrix td.heat")
    assert {h.value_of_css_property("background-color") for h in heat} - {"rgba(0, 0, 0, 0)"}, "the heat row is coloured"
    diffs = browser.find_elements(By.CSS_SELECTOR, "div.survivor pre.diff")
    assert len(diffs) == 4 and all(d.is_displayed() and "if size <= limit:" in d.text for d in diffs)
    browser.find_element(By.ID, "collapse").click()
    assert all(row.get_attribute("open") is None for row in rows)
    assert console_errors(browser) == []
