"""The engine's only uses of pytest's private modules (`_pytest.*`), each behind one small function
(a pytest release that moves one breaks one place).

pytest offers no public API for any of these needs. tests/harness/test_pytest_compat.py runs both on the oldest pytest the
project supports (8.0.0, pyproject.toml) and on the installed one.
"""
from __future__ import annotations

from collections.abc import Callable, Collection

import pytest


def marker_expression(text: str) -> Callable[[Collection[str]], bool]:
    """Whether `-m TEXT` selects an item carrying these marker names, by pytest's own grammar (`and`, `or`, `not`,
    parentheses), so the engine's reading of a run's `-m` is pytest's. Needs `_pytest.mark.expression.Expression`:
    pytest has no public parser of mark expressions. Marker arguments (`-m "name(key=value)"`) are not compared."""
    from _pytest.mark.expression import Expression

    expression = Expression.compile(text)
    return lambda names: expression.evaluate(lambda name, /, **kwargs: name in names)


def junit_writer(config: pytest.Config) -> Callable[[pytest.TestReport], None] | None:
    """What adds one test report to the JUnit XML this session writes (`--junitxml`); None when it writes none.
    Needs the session's `LogXML`, held in `config.stash` under the private key `_pytest.junitxml.xml_key`: the
    public `record_property` fixtures annotate a test case, they cannot add one."""
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    return None if xml is None else xml.pytest_runtest_logreport


def run_again(item: pytest.Item) -> list[pytest.TestReport]:
    """Run a collected item once more, from inside the session's run loop, and return its reports (setup, call,
    teardown) without logging them: how `gates mutate`'s warm session judges each mutant with the items it collected
    once. Needs `_pytest.runner.runtestprotocol`: pytest has no public way to run an item again."""
    from _pytest.runner import runtestprotocol

    return runtestprotocol(item, log=False, nextitem=None)
