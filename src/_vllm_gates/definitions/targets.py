"""Resolve `module:attribute` targets to objects defined under the project's allowed import roots (`allowed-roots`).

A target names the module an object lives in and a dotted path of public attributes to it. Every hop of that path
is looked up without running descriptors (`inspect.getattr_static`) and must be an object defined in a module under
an allowed root: no name starting with `_` (`__globals__`, `__builtins__`, `__class__`, private helpers), no hop
through a module (`cli:os.system`; name the module the object lives in), no class or function defined elsewhere
(`os.system` is defined in posix, a method inherited from `dict` in no module at all). The last hop must be callable.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import types
from collections.abc import Callable, Sequence
from typing import Any

from _vllm_gates.base.errors import DefinitionError, Problem
from _vllm_gates.definitions.model import TargetRef

_MISSING = object()


def _refuse(ref: TargetRef, key: str, message: str) -> DefinitionError:
    return DefinitionError([Problem(ref.location, key, message)])


def _under(module: str, roots: Sequence[str]) -> bool:
    """Whether a module name is an allowed root itself or a module inside one."""
    return any(module == root or module.startswith(f"{root}.") for root in roots)


def _underlying(obj: Any) -> Any:
    """The function a method-like wrapper stands for: staticmethod, classmethod and bound methods unwrap."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property) and obj.fget is not None:
        obj = obj.fget
    if isinstance(obj, types.MethodType):
        obj = obj.__func__
    return obj


def _defining_module(obj: Any) -> str | None:
    """The `__module__` the object (or the function it wraps) names, or None when it has none."""
    try:
        name = getattr(_underlying(obj), "__module__", None)
    except Exception:  # a broken __module__ counts as none
        return None
    return name if isinstance(name, str) else None


def _module_hop(module: str, hop: str, rest: str, ref: TargetRef, roots: Sequence[str]) -> str:
    hint = f"; name the module in the target: '{module}:{rest}'" if rest and _under(module, roots) else ""
    return f"hop {hop!r} is a module ({module}), not an object defined in {ref.module}{hint}"


def _submodule_exists(package: types.ModuleType, name: str) -> bool:
    """Whether `package.name` is a submodule that could be imported (found, not imported)."""
    if not hasattr(package, "__path__"):
        return False
    try:
        return importlib.util.find_spec(f"{package.__name__}.{name}") is not None
    except Exception:  # a finder that fails says nothing about the target
        return False


def _hop_problem(obj: Any, hop: str, rest: str, ref: TargetRef, roots: Sequence[str]) -> str | None:
    """Why the object reached at `hop` (`rest` the path after it) is not one defined under the roots, or None."""
    shown = ", ".join(roots)
    if isinstance(obj, types.ModuleType):
        return _module_hop(obj.__name__, hop, rest, ref, roots)
    module = _defining_module(obj)
    if module is None:
        return (f"{hop!r} has no __module__ (it is a {type(obj).__name__}), so it is not an object defined "
                f"in the allowed roots ({shown})")
    if not _under(module, roots):
        return f"{hop!r} is defined in {module}, outside the allowed roots ({shown})"
    return None


def resolve(ref: TargetRef, key: str, allowed_roots: Sequence[str]) -> Callable[..., Any]:
    """Import the module (only under an allowed root) and return the callable its attribute path names.

    Each hop of the path must be a public attribute whose object is defined under an allowed root (see the
    module's docstring); a refusal names the target as written and the hop that left the roots.
    """
    roots = tuple(allowed_roots)
    shown = ", ".join(roots)
    if not _under(ref.module, roots):  # `.build` counts under the root of its row folder
        raise _refuse(ref, key, f"target {ref.dotted!r} is outside the allowed import roots ({shown}; setting allowed-roots in [tool.vllm-gates])")
    try:
        obj: Any = importlib.import_module(ref.module)
    except Exception as exc:  # an import failure of any kind is a definition error at this place
        raise _refuse(ref, key, f"cannot import module {ref.module!r} for target {ref.dotted!r}: {type(exc).__name__}: {exc}") from exc
    if not _under(getattr(obj, "__name__", ""), roots):  # a sys.modules entry under a root's name that is another module
        raise _refuse(ref, key, f"target {ref.dotted!r}: module {ref.module!r} is {getattr(obj, '__name__', obj)!r}, outside the allowed roots ({shown})")
    parts = ref.attribute.split(".")
    for index, part in enumerate(parts):
        hop, rest = ".".join(parts[: index + 1]), ".".join(parts[index + 1:])
        if not part.isidentifier():
            raise _refuse(ref, key, f"target {ref.dotted!r}: hop {part!r} is not a Python identifier")
        if part.startswith("_"):
            raise _refuse(ref, key, f"target {ref.dotted!r}: hop {hop!r} starts with '_'; a target names public "
                                    f"attributes defined in the allowed roots ({shown}), not private names or dunders")
        found = inspect.getattr_static(obj, part, _MISSING)  # no descriptor, __getattr__ or property runs here
        if found is _MISSING and isinstance(obj, types.ModuleType) and _submodule_exists(obj, part):
            message = _module_hop(f"{obj.__name__}.{part}", hop, rest, ref, roots)  # a submodule not imported yet
            raise _refuse(ref, key, f"target {ref.dotted!r}: {message}")
        if found is _MISSING:
            owner = ref.module if index == 0 else ".".join(parts[:index])
            raise _refuse(ref, key, f"target {ref.dotted!r}: {owner!r} has no attribute {part!r}")
        problem = _hop_problem(found, hop, rest, ref, roots)
        if problem is not None:
            raise _refuse(ref, key, f"target {ref.dotted!r}: {problem}")
        try:
            obj = getattr(obj, part)  # binds methods, unwraps staticmethods: code defined under a root (checked above)
        except Exception as exc:
            raise _refuse(ref, key, f"target {ref.dotted!r}: reading {hop!r} failed: {type(exc).__name__}: {exc}") from exc
        problem = _hop_problem(obj, hop, rest, ref, roots)  # what the lookup produced must be defined there too
        if problem is not None:
            raise _refuse(ref, key, f"target {ref.dotted!r}: {problem}")
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
    """A known-bad or known-good must take the impl's parameters: otherwise a known-bad would be 'rejected', and a
    known-good refused, by a TypeError alone."""
    expected, actual = parameter_shape(impl), parameter_shape(stand_in)
    if expected is not None and actual is not None and expected != actual:
        names = lambda shape: "(" + ", ".join(name for name, _ in shape) + ")"  # noqa: E731
        raise _refuse(ref, key, f"{ref.dotted!r} takes {names(actual)} but the impl {impl_ref.dotted!r} takes {names(expected)}")
