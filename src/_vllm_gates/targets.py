"""Resolve `module:attribute` targets, only under the project's allowed import roots (`allowed-roots`)."""
from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable, Sequence

from _vllm_gates.errors import DefinitionError, Problem
from _vllm_gates.model import TargetRef


def _refuse(ref: TargetRef, key: str, message: str) -> DefinitionError:
    return DefinitionError([Problem(ref.location, key, message)])


def resolve(ref: TargetRef, key: str, allowed_roots: Sequence[str]) -> Callable[..., Any]:
    """Import the module (only under an allowed root) and return the callable attribute."""
    root = ref.module.split(".")[0]
    if root not in allowed_roots:  # `.build` counts under the root of its row folder
        raise _refuse(ref, key, f"target {ref.dotted!r} is outside the allowed import roots ({', '.join(allowed_roots)}; setting allowed-roots in [tool.vllm-gates])")
    try:
        obj: Any = importlib.import_module(ref.module)
    except Exception as exc:  # an import failure of any kind is a definition error at this place
        raise _refuse(ref, key, f"cannot import module {ref.module!r} for target {ref.dotted!r}: {type(exc).__name__}: {exc}") from exc
    for part in ref.attribute.split("."):
        if not hasattr(obj, part):
            raise _refuse(ref, key, f"target {ref.dotted!r}: {ref.module!r} has no attribute {ref.attribute!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise _refuse(ref, key, f"target {ref.dotted!r} is not callable (it is a {type(obj).__name__})")
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
        raise _refuse(ref, key, f"known-bad {ref.dotted!r} takes {names(actual)} but the impl {impl_ref.dotted!r} takes {names(expected)}")
