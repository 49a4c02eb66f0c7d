"""The `pytest11` entry of vllm-gates: cheap to import, and inert unless the project configures vllm-gates.

It declares the engine's command-line options (pytest parses them before it knows the rootdir) and, once the rootdir
is known, registers the engine's plugin (`_vllm_gates.frontends.plugin`, imported then) only where the rootdir's
`pyproject.toml` has a `[tool.vllm-gates]` table. Of the engine it imports only the feature host and the features'
modules (their options; each imports the host alone at its top, docs/architecture.md "Adding a feature").
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ENGINE = "_vllm_gates.frontends.plugin"
PREREAD = "_vllm_gates.definitions.preread"
FEATURES = "_vllm_gates.run.features"
CONFIG_FILE = "pyproject.toml"
TOOL_KEY = "vllm-gates"  # tomlsource.TOOL_KEY (a test holds the two equal): this module imports no other engine module
ENGINE_READ_LIMIT = 8 * 1024 * 1024  # the engine's limit on the file (yamlsource.MAX_FILE_BYTES): past it, the engine refuses it

_DECIDED = pytest.StashKey[bool]()
_READ: dict[str, str] = {}  # the text engine_wanted read, by path, until engage hands it on


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vllm-gates", "vllm-gates (active where pyproject.toml has [tool.vllm-gates])")
    group.addoption("--gates-audit", action="store_true", default=False,
                    help="run only each gate's audit stand-in, known-bad and known-good entries, and print the audit table")
    group.addoption("--gates-row", action="append", default=[], metavar="ROW",
                    help="judge only this row (repeatable); other rows' gate files are not collected")
    group.addoption("--gates-changed-since", metavar="REF",
                    help="judge only the rows that changes since the git ref REF can affect (files their gates import, "
                         "sources, row folder, gate file, spec, roadmap entry; the harness or pyproject.toml: every row)")
    group.addoption("--gates-impl", metavar="NAME", default=None,
                    help="judge this implementation (`python`, the default, or one of [tool.vllm-gates.implementations]); "
                         "an external one is built first when its sources changed")
    for option in importlib.import_module(FEATURES).options("pytest"):  # each feature's, declared in its module
        option.add_to_pytest(group)


def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """The rootdir is known here, before the initial conftests load: the engine registers where an entry point
    plugin always did, ahead of the project's conftests."""
    engage(early_config)


@pytest.hookimpl(tryfirst=True)  # before hypothesis loads a --hypothesis-profile that may name the engine's
def pytest_configure(config: pytest.Config) -> None:
    """Where this entry was registered after the initial conftests (a conftest's `pytest_plugins`), decide here."""
    engage(config)


def engage(config: pytest.Config) -> None:
    """Register the engine's plugin, once per session, where the project configures vllm-gates."""
    if config.stash.get(_DECIDED, False):
        return
    config.stash[_DECIDED] = True
    if engine_wanted(Path(config.rootpath)) and not config.pluginmanager.has_plugin(ENGINE):
        _hand_on(Path(config.rootpath) / CONFIG_FILE)
        config.pluginmanager.register(importlib.import_module(ENGINE), ENGINE)


def engine_wanted(root: Path) -> bool:
    """Whether the engine loads for the project at ``root``: its pyproject.toml has a `[tool.vllm-gates]` table, or is
    a regular file the engine refuses (unreadable, over the limit, not UTF-8, not TOML), which the engine then names
    as it always did. No file, or a file without the table: the project does not configure vllm-gates."""
    path = root / CONFIG_FILE
    if not path.is_file():  # a FIFO or a device is not a file here: never opened (as config.load_config)
        return False
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        import tomli as tomllib
    preread = sys.modules.get(PREREAD)  # loaded only where the engine is: `gates` read the file already
    try:
        text = preread.recall(path) if preread is not None else None
        if text is None:
            if path.stat().st_size > ENGINE_READ_LIMIT:
                return True
            text = path.read_bytes().decode("utf-8")
        _READ[str(path)] = text
        document = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return True
    tool = document.get("tool", {})
    return isinstance(tool, dict) and TOOL_KEY in tool


def _hand_on(path: Path) -> None:
    """Hand the text this entry read to the engine's configuration reader (`_vllm_gates.definitions.preread`, a leaf), so the run
    reads pyproject.toml once."""
    text = _READ.pop(str(path), None)
    if text is not None:
        importlib.import_module(PREREAD).remember(path, text)
