"""Targets stay inside the roots: a `module:attr.attr` target resolves only to an object defined under an allowed root.

Each escape (a module hop such as `impl:os.system`, a dunder such as `__globals__` or `__builtins__`, a class or
function defined outside the roots) is a definition error: `gates run` exits 3 and names the gate file's line, the
target as written and the hop that left the roots. A `Class.method` chain defined under the root still resolves.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from _vllm_gates.base.errors import DefinitionError, Location
from _vllm_gates.definitions.model import TargetRef
from _vllm_gates.definitions.targets import resolve

pytestmark = pytest.mark.cpu

GATE_FILE = "gates/rows/example/gate.yaml"
IMPL = "example_row/impl.py"
ORACLE = "example_row.oracle:counted_page_bytes"
ROOTS = "(example_row, gates)"

HEADER = '"""Toy impl: bytes of one KV page by formula (EX-1.1, EX-1.2)."""\n'
OUTSIDERS = '''import functools
import os
from fractions import Fraction
from os import system


class Pages(Fraction):
    """Defined here; what it inherits from Fraction is defined in fractions."""


class Table(dict):
    """Defined here; what it inherits from dict has no __module__ at all."""


def _private_oracle(block_size, heads, head_size, dtype_bytes):
    return 2 * block_size * heads * head_size * dtype_bytes


bound_later = functools.partial(len)
'''
INSIDERS = '''

class Sizer:
    """A class under the root: its methods are fine targets."""

    factor = 2

    @staticmethod
    def counted(block_size, heads, head_size, dtype_bytes):
        return 2 * block_size * heads * head_size * dtype_bytes

    @classmethod
    def by_factor(cls, block_size, heads, head_size, dtype_bytes):
        return cls.factor * block_size * heads * head_size * dtype_bytes

    def bound(self, block_size, heads, head_size, dtype_bytes):
        return self.factor * block_size * heads * head_size * dtype_bytes

    class Nested:
        @staticmethod
        def counted(block_size, heads, head_size, dtype_bytes):
            return 2 * block_size * heads * head_size * dtype_bytes


SIZER = Sizer()


def made_by(factor):
    def oracle(block_size, heads, head_size, dtype_bytes):
        return factor * block_size * heads * head_size * dtype_bytes
    return oracle


made_oracle = made_by(2)
'''


def _with_oracle(example, target: str, extra: str = OUTSIDERS) -> int:
    """Add helpers to example_row/impl.py and make `target` the gate's oracle; return the oracle's line."""
    example.edit(HEADER, HEADER + extra, IMPL)
    example.edit(f"oracle: {ORACLE}", f"oracle: {target}")
    return example.line(f"oracle: {target}")


@dataclass(frozen=True)
class Escape:
    id: str
    target: str
    says: str  # the refusal, after "target 'TARGET': "


ESCAPES = [
    Escape("module-hop-os", "example_row.impl:os.system",
           "hop 'os' is a module (os), not an object defined in example_row.impl"),
    Escape("globals", "example_row.impl:page_bytes.__globals__",
           "hop 'page_bytes.__globals__' starts with '_'"),
    Escape("globals-update", "example_row.impl:page_bytes.__globals__.update",
           "hop 'page_bytes.__globals__' starts with '_'"),
    Escape("builtins", "example_row.impl:__builtins__", "hop '__builtins__' starts with '_'"),
    Escape("class-dunder", "example_row.impl:Pages.__class__", "hop 'Pages.__class__' starts with '_'"),
    Escape("private-helper", "example_row.impl:_private_oracle", "hop '_private_oracle' starts with '_'"),
    Escape("package-module-hop", "example_row:impl.page_bytes",
           "hop 'impl' is a module (example_row.impl), not an object defined in example_row; "
           "name the module in the target: 'example_row.impl:page_bytes'"),
    Escape("class-outside", "example_row.impl:Fraction.from_float",
           f"'Fraction' is defined in fractions, outside the allowed roots {ROOTS}"),
    Escape("inherited-from-outside", "example_row.impl:Pages.from_float",
           f"'Pages.from_float' is defined in fractions, outside the allowed roots {ROOTS}"),
    Escape("inherited-without-module", "example_row.impl:Table.keys",
           f"'Table.keys' has no __module__ (it is a method_descriptor), so it is not an object defined in the allowed roots {ROOTS}"),
    Escape("function-from-outside", "example_row.impl:system",
           f"'system' is defined in {os.system.__module__}, outside the allowed roots {ROOTS}"),
    Escape("partial", "example_row.impl:bound_later",
           f"'bound_later' is defined in functools, outside the allowed roots {ROOTS}"),
]


@pytest.mark.parametrize("escape", ESCAPES, ids=[e.id for e in ESCAPES])
def test_a_target_that_leaves_the_roots_is_refused(example, escape):
    line = _with_oracle(example, escape.target)
    result = example.gates("run")
    assert result.code == 3, result.text
    message = f"{GATE_FILE}:{line}:"
    assert message in result.text, result.text
    assert f"gate page-bytes.oracle: target {escape.target!r}: {escape.says}" in result.text, result.text
    assert "ERROR" in result.out


LEGITIMATE = [
    "example_row.impl:Sizer.counted",  # staticmethod
    "example_row.impl:Sizer.by_factor",  # classmethod, bound to the class
    "example_row.impl:SIZER.bound",  # method bound to a module-level instance of a class under the root
    "example_row.impl:Sizer.Nested.counted",  # class inside a class
    "example_row.impl:made_oracle",  # a closure a factory under the root made at module level
]


@pytest.mark.parametrize("target", LEGITIMATE)
def test_a_chain_defined_under_the_root_resolves(example, target):
    _with_oracle(example, target, INSIDERS)
    result = example.gates("run")
    assert result.code == 0, result.text
    assert "definition error" not in result.text


def test_a_refused_hop_is_not_run(example):
    """Hops are looked up statically: a property whose getter is defined outside the roots is refused, not called."""
    spy = '''

class Spy:
    def __repr__(self):
        return "SPY-GETTER-RAN"

    probe = property(print)  # reading SPY.probe would print(SPY)


SPY = Spy()
'''
    line = _with_oracle(example, "example_row.impl:SPY.probe", OUTSIDERS + spy)
    result = example.gates("run")
    assert result.code == 3, result.text
    assert f"{GATE_FILE}:{line}:" in result.text
    assert f"target 'example_row.impl:SPY.probe': 'SPY.probe' is defined in builtins, outside the allowed roots {ROOTS}" in result.text
    assert "SPY-GETTER-RAN" not in result.text


def _ref(dotted: str) -> TargetRef:
    return TargetRef(dotted, Location("gate.yaml", 7, 5))


def test_resolve_refuses_the_engine_modules_imports():
    """The issue's `gates.harness.cli:os.system`, on a module that imports os: a DefinitionError at the target's line."""
    with pytest.raises(DefinitionError) as refused:
        resolve(_ref("_vllm_gates.frontends.cli:os.system"), "gate g.impl", ("_vllm_gates",))
    (problem,) = refused.value.problems
    assert problem.location == Location("gate.yaml", 7, 5)
    assert problem.key == "gate g.impl"
    assert problem.message == "target '_vllm_gates.frontends.cli:os.system': hop 'os' is a module (os), not an object defined in _vllm_gates.frontends.cli"


def test_resolve_still_refuses_a_module_outside_the_roots():
    with pytest.raises(DefinitionError, match=r"target 'os:system' is outside the allowed import roots \(_vllm_gates;"):
        resolve(_ref("os:system"), "gate g.impl", ("_vllm_gates",))


def test_resolve_returns_a_function_defined_under_the_root():
    from _vllm_gates.definitions.targets import parameter_shape

    assert resolve(_ref("_vllm_gates.definitions.targets:parameter_shape"), "k", ("_vllm_gates",)) is parameter_shape


def test_a_submodule_is_a_module_hop_whether_or_not_it_was_imported():
    """`pkg:sub.func` is refused the same way before and after `pkg.sub` is imported (sub is then an attribute)."""
    import sys

    expected = ("target 'json:tool.main': hop 'tool' is a module (json.tool), not an object defined in json; "
                "name the module in the target: 'json.tool:main'")
    saved = sys.modules.pop("json.tool", None)
    try:
        for _ in range(2):  # first not imported, then imported
            with pytest.raises(DefinitionError) as refused:
                resolve(_ref("json:tool.main"), "k", ("json",))
            assert refused.value.problems[0].message == expected
            import json.tool  # noqa: F401
    finally:
        if saved is not None:
            sys.modules["json.tool"] = saved
