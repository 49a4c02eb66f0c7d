"""What a marker requires of the machine, and how the judge tells whether this machine has it (docs/gate-files.md, "Markers").

`[tool.vllm-gates.markers]` declares each marker's requirement: a built-in one (`cuda`, `upstream`) or the project's
own, `{ detect = "package.module:function", device = true|false }`. The core speaks only of "the marker's
requirement" and whether that requirement is a device (README, "Markers"); it never names a marker.
"""
from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from _vllm_gates.base.errors import DefinitionError, Location, Problem

DETECT_FORMAT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class MarkerRequirement:
    """A marker's requirement: its name (a built-in's, or the project detector's `package.module:function`), whether it
    is a device (a PARTIAL claim lets gates needing a device be skipped; a simulated device stands in for it), and
    where the project declared its detector."""

    name: str
    device: bool = False
    detect: str | None = None  # the project's detector: called with no argument, returns why unmet, or None
    declared: Location | None = None  # the pyproject.toml line of the project's detector
    key: str = ""  # the key that declares it there (`markers.fpga.requires`)

    @property
    def upstream(self) -> bool:
        """Gates needing it compare with the pinned upstream release: they judge the parity claim."""
        return self == UPSTREAM


CUDA = MarkerRequirement("cuda", device=True)
SIMULATED_DEVICE_ENV = "VLLM_GATES_SIMULATED_DEVICE"  # names a recorded fake GPU; its evidence never backs a claim
UPSTREAM = MarkerRequirement("upstream")
BUILT_IN = {r.name: r for r in (CUDA, UPSTREAM)}


def cuda_unavailable_reason(project: Any) -> str | None:
    """Why items that require CUDA cannot run here, or None when a CUDA device (or a simulated one) is present."""
    if os.environ.get(SIMULATED_DEVICE_ENV, "").strip():
        return None  # a recorded fake device stands in: what runs on it is marked simulated and backs no claim
    return _cuda_unavailable_reason()


@lru_cache(maxsize=1)
def _cuda_unavailable_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    return None


def upstream_unavailable_reason(project: Any) -> str | None:
    """Why gates that compare with the pinned upstream release cannot run here (it is not installed, or another
    version is), or None. Only the installed metadata is read: the judge never imports upstream code."""
    from importlib import metadata

    pin = project.upstream
    if pin is None:
        return "the project pins no upstream release"
    hint = f" ({pin.install} installs it)" if pin.install else ""
    try:
        found = metadata.version(pin.package)
    except metadata.PackageNotFoundError:
        return f"{pin.package} {pin.version} is not installed{hint}"
    if found != pin.version:
        return f"{pin.package} {found} is installed, but the project pins {pin.version}{hint}"
    return None


DETECTORS: dict[str, Callable[[Any], str | None]] = {"cuda": cuda_unavailable_reason, "upstream": upstream_unavailable_reason}


def unmet(requirement: MarkerRequirement, project: Any) -> str | None:
    """Why this machine lacks ``requirement`` (None: it has it); DefinitionError, at its pyproject.toml line, when the
    project's detector cannot be imported, raises, or answers something other than a non-empty string or None."""
    if requirement.detect is None:
        return DETECTORS[requirement.name](project)
    module_name, function_name = requirement.detect.split(":")
    try:
        detector = getattr(importlib.import_module(module_name), function_name)
        answer = detector()
    except Exception as exc:
        raise _detector_problem(requirement, f"raised {type(exc).__name__}: {exc}") from None
    if answer is not None and not (isinstance(answer, str) and answer.strip()):
        raise _detector_problem(requirement, f"returned {answer!r}: a detector returns why the requirement is unmet "
                                             f"(a non-empty string) or None")
    return answer


def _detector_problem(requirement: MarkerRequirement, what: str) -> DefinitionError:
    where = requirement.declared or Location("pyproject.toml", 1, 1)
    return DefinitionError([Problem(where, f"[tool.vllm-gates] {requirement.key}", f"detect = {requirement.detect!r}: the "
                                                                                  f"detector {what}")])
