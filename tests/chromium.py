"""Debian's headless chromium driven through its chromedriver (ci/install-system-deps.sh installs both), for the
tests of pages people open in a browser (docs/reports.md). Skipped, saying why, only where chromium, chromedriver
or selenium is not installed."""
from __future__ import annotations

import shutil
from typing import Any, Iterator

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless chromium that keeps the page's console log (`browser.get_log("browser")`)."""
    if not CHROMIUM or not CHROMEDRIVER:
        pytest.skip("no chromium and chromedriver on PATH (bash ci/install-system-deps.sh installs them)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra: pip install -e '.[test]'")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(15)
    yield driver
    driver.quit()


def console_errors(driver: Any) -> list[dict[str, Any]]:
    """The page's console entries at level SEVERE or ERROR."""
    return [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]
