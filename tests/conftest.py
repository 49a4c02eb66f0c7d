"""Every test judges this checkout's engine (src/), in the test process as in the commands the tests start."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SRC = Path(__file__).resolve().parents[1] / "src"  # this checkout's engine: the one under test


def pytest_configure(config: pytest.Config) -> None:
    """An engine imported from elsewhere (an install of another checkout) would be tested in its place: refused,
    naming both and the cure."""
    import _vllm_gates

    imported = Path(_vllm_gates.__file__).resolve().parent.parent
    if imported != SRC:
        raise pytest.UsageError(f"the engine imported here is {imported}, not this checkout's {SRC}: "
                                f"run the tests with PYTHONPATH={SRC}")
