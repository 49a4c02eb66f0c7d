"""Resolve `module:attribute` targets, only under the allowed import roots (impl, oracles, gates by default)."""
from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable, Sequence

from gates.harness.model import TargetRef
from gates.harness.yamlsource import Problem

DEFAULT_ALLOWED_ROOTS = ("impl", "oracles", "gates")


class TargetError(Exception):
    """A target that is refused or cannot be resolved."""

    def __init__(self, problem: Problem):
        self.problem = problem
        super().__init__(str(problem))


def resolve(ref: TargetRef, key: str, allowed_roots: Sequence[str]) -> Callable[..., Any]:
    """Import the module (only under an allowed root) and return the callable attribute."""
    root = ref.module.split(".")[0]
    if root not in allowed_roots:
        raise TargetError(Problem(ref.location, key, f"target {ref.dotted!r} is outside the allowed import roots ({', '.join(allowed_roots)})"))
    try:
        obj: Any = importlib.import_module(ref.module)
    except Exception as exc:  # an import failure of any kind is a definition error at this place
        raise TargetError(Problem(ref.location, key, f"cannot import module {ref.module!r} for target {ref.dotted!r}: {type(exc).__name__}: {exc}")) from exc
    for part in ref.attribute.split("."):
        if not hasattr(obj, part):
            raise TargetError(Problem(ref.location, key, f"target {ref.dotted!r}: {ref.module!r} has no attribute {ref.attribute!r}"))
        obj = getattr(obj, part)
    if not callable(obj):
        raise TargetError(Problem(ref.location, key, f"target {ref.dotted!r} is not callable (it is a {type(obj).__name__})"))
    return obj


def parameter_shape(fn: Callable[..., Any]) -> tuple[tuple[str, str], ...] | None:
    """Parameter names and kinds, or None when the signature cannot be read (builtins, C functions)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return tuple((p.name, p.kind.name) for p in signature.parameters.values())


def check_same_signature(impl: Callable[..., Any], stand_in: Callable[..., Any], ref: TargetRef, key: str, impl_ref: TargetRef) -> None:
    """A known-bad must take the impl's parameters, or it would be 'rejected' by a TypeError alone."""
    expected, actual = parameter_shape(impl), parameter_shape(stand_in)
    if expected is not None and actual is not None and expected != actual:
        names = lambda shape: "(" + ", ".join(name for name, _ in shape) + ")"  # noqa: E731
        raise TargetError(Problem(ref.location, key, f"known-bad {ref.dotted!r} takes {names(actual)} but the impl {impl_ref.dotted!r} takes {names(expected)}"))
