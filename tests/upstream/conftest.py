"""Registers the `upstream` marker for these tests when the project configuration does not (yet) declare it, so
`--strict-markers` accepts it either way."""
from __future__ import annotations


def pytest_configure(config) -> None:
    registered = {line.split(":", 1)[0].strip() for line in config.getini("markers")}
    if "upstream" not in registered:
        config.addinivalue_line("markers", "upstream: compares with the pinned vLLM release (bash ci/install-upstream.sh)")
