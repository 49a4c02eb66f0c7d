"""`sources:` patterns have one meaning (issue 27 item 3): what selection calls affected, what a fingerprint covers
and what the gate-file check finds agree on generated trees and patterns, and all three mean what `Path.glob` means."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _vllm_gates.definitions.gatefile import _source_unmatched
from _vllm_gates.definitions.model import GateFile
from _vllm_gates.definitions.patterns import SKIPPED_FOLDERS, declared_files, files_matching, matches, pattern_parts
from _vllm_gates.run.selection import RowInputs, _why_path

NAMES = ("a", "b", "a.py", "b.py", ".h", "__pycache__", "[x]")
PARTS = ("*", "**", "?", "a", "b", "*.py", "a*", "?.py", "[ab]", "[!a]*", ".h", "__pycache__", "[[]x]")


@st.composite
def trees(draw) -> list[str]:
    """Small file trees: paths of one to three parts, none both a file and a folder."""
    files: list[tuple[str, ...]] = []
    for path in draw(st.lists(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map(tuple), max_size=8)):
        clash = any(path[: len(f)] == f or f[: len(path)] == path for f in files)
        if not clash:
            files.append(path)
    return ["/".join(f) for f in files]


patterns = st.lists(st.sampled_from(PARTS), min_size=1, max_size=3).map("/".join)
sources = st.lists(st.one_of(patterns, patterns.map("!".__add__)), min_size=1, max_size=3)


def _write(root: Path, files: list[str]) -> None:
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)


def _pathlib(root: Path, pattern: str) -> set[str]:
    """What Python 3.11's `Path.glob` matches, cache folders left out; a trailing `**` (folders only there) read as
    `**/*`, every file below."""
    spelled = f"{pattern}/*" if pattern_parts(pattern)[-1] == "**" else pattern
    found = (p.relative_to(root).as_posix() for p in root.glob(spelled) if p.is_file())
    return {f for f in found if not SKIPPED_FOLDERS & set(f.split("/")[:-1])}


def _affected(path: str, declared: list[str]) -> bool:
    """Whether selection calls a row with these `sources:` (and no folder, spec or imports here) affected by ``path``."""
    gate_file = GateFile("gates/gate.yaml", "ROW", "", "spec/row.md", tuple(declared), ())
    return _why_path(gate_file, RowInputs(frozenset(), frozenset()), path, set()) is not None


@settings(max_examples=150, deadline=None)
@given(trees(), sources)
def test_selection_fingerprints_and_the_gate_file_check_agree(files, declared):
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _write(root, files)
        covered = declared_files(root, declared)
        assert [f for f in sorted(files) if _affected(f, declared)] == covered
        for pattern in (p for p in declared if not p.startswith("!")):
            listed = set(files_matching(root, pattern))
            assert listed == {f for f in files if matches(f, pattern)} == _pathlib(root, pattern)
            assert (_source_unmatched(root, pattern) is None) == bool(listed)


@pytest.mark.parametrize("path, pattern, expected", [
    ("impl/x.py", "impl/*.py", True),
    ("impl/sub/x.py", "impl/*.py", False),  # `*` stays in one folder (fnmatch let it cross `/`)
    ("impl/sub/x.py", "impl/**/*.py", True),
    ("impl/x.py", "impl/**/*.py", True),  # `**` is zero or more folders
    ("impl/sub/x.py", "impl/**", True),
    ("impl", "impl/**", False),  # a folder's pattern matches the files below it, not a file of its name
    ("impl/__pycache__/x.pyc", "impl/**", False),
    ("a[1]/x", "a[[]1]/x", True),
])
def test_a_pattern_means_what_path_glob_means(path, pattern, expected):
    assert matches(path, pattern) is expected


@pytest.mark.parametrize("pattern", ["a**b/x.py", "", "/"])
def test_a_pattern_pathlib_refuses_is_refused(pattern, tmp_path):
    with pytest.raises(ValueError):
        matches("a/x.py", pattern)
    for written in (pattern, f"!{pattern}"):  # an exclusion too: the gate file says so, not the first run that uses it
        assert "is not a usable glob" in (_source_unmatched(tmp_path, written) or "")
