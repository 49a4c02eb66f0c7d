"""The settings of the implementation under gate (`[tool.vllm-gates.implementations.NAME] settings`), as a worker
received them in the judge's hello; gate builders read them through ``vllm_gates.settings()``."""
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

_CURRENT: dict[str, str] = {}


def current() -> Mapping[str, str]:
    """This process's settings (empty where no worker hello set them: the defaults apply)."""
    return MappingProxyType(_CURRENT)


def set_current(values: Any) -> None:
    """Replace this process's settings with a hello's `settings` object (text values only)."""
    _CURRENT.clear()
    if isinstance(values, dict):
        _CURRENT.update({str(k): str(v) for k, v in values.items() if isinstance(v, str)})
