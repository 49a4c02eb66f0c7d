"""`gates report --html F` (issue 28 item 7): one self-contained page, every value escaped, long parts cut and
counted, a missing mutation report said on the page, a named report that cannot be used a usage error."""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from _vllm_gates.frontends import cli, html_report
from _vllm_gates.frontends.html_report import MAX_DIFF_CHARS, MAX_SURVIVORS, Source, render_page

pytestmark = pytest.mark.cpu

DATA = Path(__file__).parent / "data"
RUN = DATA / "run-report.json"
MUTATION = DATA / "mutation-report.json"


def _page(tmp_path: Path, *args: str) -> tuple[int, str]:
    out = tmp_path / "report.html"
    code = cli.main(["report", "--html", str(out), *args])
    return code, out.read_text(encoding="utf-8") if out.exists() else ""


def test_the_page_has_rows_milestones_gates_matrix_and_survivors(tmp_path):
    code, page = _page(tmp_path, "--run", str(RUN), "--mutation", str(MUTATION))
    assert code == 0
    assert page.count('<details class="row">') == 2 and page.count('<details class="milestone">') == 2
    assert page.count('<details class="gate">') == 11 and "claims <b>DONE</b>" in page
    assert page.count('class="c c-k"') == 14 + 2, "one first-kill cell per killed mutant and per known-bad"
    assert page.count('<div class="survivor">') == 4 and '<span class="del">-    if size &lt; limit:</span>' in page
    assert "redundant gates (kill nothing another does not): version, bad-values" in page


def test_every_value_is_escaped_and_nothing_is_fetched(tmp_path):
    _, page = _page(tmp_path, "--run", str(RUN), "--mutation", str(MUTATION))
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt; &amp; &lt;/details&gt;" in page
    assert "<script>alert" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "<b>old-version</b>" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page), "the page fetches nothing"
    assert page.count("<script>") == 1
    assert _unbalanced(page) == [], "hostile values do not open or close elements"


def _unbalanced(page: str) -> list[tuple[str | None, str]]:
    """Each end tag that does not close the element opened last, and the elements never closed."""
    class Tags(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.open: list[str] = []
            self.wrong: list[tuple[str | None, str]] = []

        def handle_starttag(self, tag: str, attrs: object) -> None:
            if tag != "meta":
                self.open.append(tag)

        def handle_endtag(self, tag: str) -> None:
            last = self.open.pop() if self.open else None
            if last != tag:
                self.wrong.append((last, tag))

    tags = Tags()
    tags.feed(page)
    return tags.wrong + [(tag, "") for tag in tags.open]


def test_without_a_mutation_report_the_section_says_so(example):
    out = example.root / "out" / "report.html"
    result = example.gates("report", "--html", str(out), "--run", str(RUN))
    assert result.code == 0, result.err
    assert "No mutation run: reports/mutation.json does not exist" in out.read_text(encoding="utf-8")


def test_long_survivor_lists_and_diffs_are_cut_and_counted():
    document = json.loads(MUTATION.read_text(encoding="utf-8"))
    row = document["rows"][0]
    survivor = next(m for m in row["mutants"] if m["status"] == "survived")
    row["mutants"] = [dict(survivor, diff="+" + "x" * (MAX_DIFF_CHARS * 3)) for _ in range(MAX_SURVIVORS + 7)]
    page = render_page(Source("run", None, "none"), Source("m.json", document))
    assert page.count('<div class="survivor">') == MAX_SURVIVORS
    assert "7 more survivors not shown (first 50 of 57)" in page
    assert f"… {MAX_DIFF_CHARS * 2 + 1} more characters of this diff not shown" in page
    assert len(page) < 60 * (MAX_DIFF_CHARS + 1000), "bounded however large the diffs"


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"), ("{nope", "is not JSON"), ('{"schema": "vllm-gates/run/3"}', "has schema 'vllm-gates/run/3'"),
])
def test_a_named_report_that_cannot_be_used_is_a_usage_error(tmp_path, capsys, content, message):
    bad = tmp_path / "m.json"
    if content is not None:
        bad.write_text(content, encoding="utf-8")
    code, page = _page(tmp_path, "--run", str(RUN), "--mutation", str(bad))
    assert code == 2 and page == ""
    assert f"--mutation {bad} {message}" in capsys.readouterr().err


def test_a_malformed_report_is_said_on_the_page_naming_the_field_and_value():
    document = {"schema": html_report.MUTATION_SCHEMA, "rows": [{"row": ["x"], "mutants": [1, {"status": 3, "gates_run": 5}],
                                                                "gates": "no", "known_bads": None, "score": "high"}]}
    page = render_page(Source("r.json", {"rows": [{"gates": 7, "milestones": [None, {}]}], "items": "x"}), Source("m.json", document))
    assert "Malformed mutation report: m.json: rows[0]: field &#x27;row&#x27; must be a text, got [&#x27;x&#x27;]" in page
    assert "Malformed run report: r.json: missing field &#x27;meta&#x27;" in page and page.endswith("</html>\n")
    survivor = json.loads(MUTATION.read_text(encoding="utf-8"))
    survivor["rows"][0]["mutants"][0]["status"] = "alive"
    page = render_page(Source("run", None, "none"), Source("m.json", survivor))
    assert "rows[0]: mutants[0]: field &#x27;status&#x27; must be one of killed, survived" in page and "got &#x27;alive&#x27;" in page
