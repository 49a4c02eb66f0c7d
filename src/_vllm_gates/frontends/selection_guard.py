"""What `gates run` and `gates audit` judge is what their own arguments select (README, "One gate at a time"): pytest
options that reach their pytest run from outside them, in `PYTEST_ADDOPTS` or the ini file's `addopts`, and would
narrow or change the items judged are refused (exit 2), naming the source and the option.

Refused: `-k`, `-m` (`--marker` places its own), node ids and paths (the command names the gate files),
`--deselect`, `--lf`/`--last-failed` and `--lfnf`, `--sw`/`--stepwise` and `--sw-skip` (they narrow to what failed
before, or stop and resume), and the engine's own `--gates-audit`, `--gates-row`, `--gates-changed-since`,
`--gates-evidence`, `--gates-impl` and `--gates-mutation` (each has its `gates` argument). Not refused: options that
change only the output (`-v`, `-q`, `-r`, `--tb`, `--gates-json`), the process (`-p`, `-n`, `--dist`, `-W`), or can
only stop a run after a failure or run nothing (`-x`, `--maxfail`, `--co`, `--setup-only`: judged INCOMPLETE, FAIL or
nothing ran, never green); `--ignore`/`--ignore-glob` skip no file the command names; `--ff`/`--nf` only reorder.
A plain `pytest` run keeps every option: narrowed, it is a partial selection (partial.py) and says so in its table.
"""
from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from _vllm_gates.run.features import options

FILE_OR_DIR = "file_or_dir"  # pytest's namespace attribute of the positional arguments


@dataclass(frozen=True)
class Narrowing:
    """An option that narrows or changes what a run judges: its attribute in pytest's namespace, its spellings, what
    it does, and what `gates` offers instead."""

    dest: str
    spellings: tuple[str, ...]
    does: str
    instead: str = "gates run ROW --gate ID [--case NAME], a partial run that judges no claim"


NARROWING = (
    Narrowing("keyword", ("-k",), "keeps only the items whose names match"),
    Narrowing("markexpr", ("-m",), "keeps only the items whose markers match", "--marker"),
    Narrowing("deselect", ("--deselect",), "leaves these items out"),
    Narrowing("lf", ("--lf", "--last-failed"), "runs only the items that failed last time"),
    Narrowing("last_failed_no_failures", ("--lfnf", "--last-failed-no-failures"), "decides what --lf runs"),
    Narrowing("stepwise", ("--sw", "--stepwise"), "stops at the first failure and resumes there next time"),
    Narrowing("stepwise_skip", ("--sw-skip", "--stepwise-skip"), "runs stepwise past one failure"),
    Narrowing("gates_audit", ("--gates-audit",), "judges the gates' known-bads instead of the implementation",
              "gates audit"),
    Narrowing("gates_row", ("--gates-row",), "narrows the rows judged", "gates run ROW"),
    Narrowing("gates_changed_since", ("--gates-changed-since",), "narrows the rows judged", "--changed-since"),
    Narrowing("gates_impl", ("--gates-impl",), "changes the implementation judged", "--impl"),
    *(Narrowing(option.pytest_dest, (f"--gates-{option.name}",), option.narrows, f"--{option.name}")
      for option in options("pytest") if option.narrows),  # the features' (features.RunOption.narrows)
)
POSITIONAL = Narrowing(FILE_OR_DIR, (), "adds node ids or paths to the gate files the command names",
                       "gates run ROW --gate ID [--case NAME], or `testpaths` for a project's own tests")


@dataclass(frozen=True)
class Found:
    """One refused option: where it came from (PYTEST_ADDOPTS, or the ini file's addopts), as written, and why."""

    source: str
    shown: str
    narrowing: Narrowing

    def text(self) -> str:
        return f"{self.source} sets {self.shown}, which {self.narrowing.does} (use {self.narrowing.instead})"


def _written(narrowing: Narrowing, tokens: Sequence[str]) -> str:
    """The first token that sets the option (`-k`, `-kEXPR`, `--deselect=ID`), else its first spelling."""
    for token in tokens:
        for spelling in narrowing.spellings:
            if token == spelling or token.startswith(spelling + "=") or (not spelling.startswith("--") and token.startswith(spelling)):
                return token
    return narrowing.spellings[0]


def _shown(narrowing: Narrowing, tokens: Sequence[str], value: Any) -> str:
    """The option as the source wrote it, with its values where they stand apart (`-k 'fp16-page'`)."""
    if narrowing is POSITIONAL:
        return " ".join(shlex.quote(str(v)) for v in value)
    written = _written(narrowing, tokens)
    if isinstance(value, bool) or value is None or written not in narrowing.spellings:
        return written
    return " ".join(f"{written} {shlex.quote(str(v))}" for v in (value if isinstance(value, list) else [value]))


def found_in(source: str, tokens: Sequence[str], parser: pytest.Parser) -> list[Found]:
    """The refused options among ``tokens`` (one source's arguments), read by pytest's own parser: an option set to
    other than its default, a positional argument, or a spelling pytest does not know here (`--lf` where the cache
    plugin is off)."""
    if not tokens:
        return []
    namespace, unknown = parser.parse_known_and_unknown_args(list(tokens))
    defaults, _ = parser.parse_known_and_unknown_args([])
    found = []
    for narrowing in NARROWING:
        value = getattr(namespace, narrowing.dest, None)
        if hasattr(namespace, narrowing.dest) and value != getattr(defaults, narrowing.dest, None):
            found.append(Found(source, _shown(narrowing, tokens, value), narrowing))
        elif any(t.split("=", 1)[0] in narrowing.spellings for t in unknown):
            found.append(Found(source, _shown(narrowing, unknown, True), narrowing))
    positional = list(getattr(namespace, FILE_OR_DIR, None) or ())
    if positional:
        found.append(Found(source, _shown(POSITIONAL, tokens, positional), POSITIONAL))
    return found


def _ini_source(config: pytest.Config) -> str:
    inipath = config.inipath
    if inipath is None:
        return "addopts"
    try:
        shown = inipath.relative_to(config.rootpath)
    except ValueError:
        shown = inipath
    return f"addopts in {Path(shown).as_posix()}"


def refusal(config: pytest.Config, parser: pytest.Parser) -> str | None:
    """The refusal of the options this run got from PYTEST_ADDOPTS and the ini file's addopts; None if there is none."""
    found = found_in("PYTEST_ADDOPTS", shlex.split(os.environ.get("PYTEST_ADDOPTS", "")), parser)
    found += found_in(_ini_source(config), list(config.getini("addopts")), parser)
    if not found:
        return None
    return ("gates: refused: " + "; ".join(f.text() for f in found) + ". `gates run` and `gates audit` judge only what "
            "their own arguments select: remove it for this command (a plain pytest run keeps it, as a partial selection)")


class SelectionGuard:
    """The plugin `gates run` and `gates audit` add to their pytest run: it refuses (a usage error, exit 2) the
    options that reached it from PYTEST_ADDOPTS or the ini file's addopts and narrow or change what it judges."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_load_initial_conftests(self, early_config: pytest.Config, parser: pytest.Parser) -> None:
        refused = refusal(early_config, parser)
        if refused:
            raise pytest.UsageError(refused)
