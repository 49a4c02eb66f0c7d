"""The engine cites the spec and the docs, never a tracker's numbers: "issue 28 item 5" in a docstring or a comment
dates the code and tells a reader nothing once the issue is closed; "docs/reports.md" or a reason still does."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "src"
# "issue 25", "Issue 28", "issues 3", "issue #7"; "item 4", "items 1-4", "items 3 and 4"
TRACKER_NUMBER = re.compile(r"\bissues? #?\d+|\bitems? \d+(?:\s*(?:-|and)\s*\d+)?\b", re.IGNORECASE)


def tracker_numbers(text: str) -> list[tuple[int, str]]:
    """Each tracker reference in ``text``: its line (1-based) and the words."""
    return [(text.count("\n", 0, found.start()) + 1, found.group(0)) for found in TRACKER_NUMBER.finditer(text)]


def test_the_pattern_finds_tracker_numbers():
    text = "(issue 28 item 5)\nIssue 29: tensors\n(issue 28 items 1-4)\n(issue 29 items 3 and 4)\nsee issue #7"
    assert tracker_numbers(text) == [(1, "issue 28"), (1, "item 5"), (2, "Issue 29"), (3, "issue 28"), (3, "items 1-4"),
                                     (4, "issue 29"), (4, "items 3 and 4"), (5, "issue #7")]


def test_the_pattern_leaves_plain_words_alone():
    assert tracker_numbers("an item's outcome; 3 items; 2 issues; the issue is that the item\n4 cases ran") == []


def test_the_engine_cites_no_tracker_numbers():
    found = [f"{path.relative_to(ROOT)}:{line}: {words}"
             for path in sorted(ENGINE.rglob("*")) if path.suffix in (".py", ".json", ".md")
             for line, words in tracker_numbers(path.read_text(encoding="utf-8"))]
    assert not found, ("cite the doc or the spec requirement and say why, instead of a tracker's number:\n"
                       + "\n".join(found))
