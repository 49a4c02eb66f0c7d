"""Shared fixtures of the CAPI-ABI tests: the spec header text and a skip when no C compiler works."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gates.rows.capi_abi.build import SPEC_HEADER
from oracles.abi.toolchain import CompilerUnavailable, find_compiler


@pytest.fixture(scope="session")
def spec_text() -> str:
    return SPEC_HEADER.read_text(encoding="utf-8")


@pytest.fixture
def compiler() -> None:
    """Skip (with the reason) a test that needs the C compiler when there is none."""
    try:
        find_compiler()
    except CompilerUnavailable as exc:
        pytest.skip(f"compiled C ABI oracle unavailable: {exc}")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Builds go to one cache per test session, never to a shared one."""
    monkeypatch.setenv("VLLM_GATES_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "capi-cache"))


GATE_FILE = Path(__file__).resolve().parents[2] / "gates" / "rows" / "capi_abi" / "gate.yaml"


def gate_case_input(gate: str, case: str) -> dict[str, Any]:
    """The input of a case of the CAPI-ABI gate file, so a test reads the same header the gate does."""
    gates = yaml.safe_load(GATE_FILE.read_text(encoding="utf-8"))["gates"]
    return next(g for g in gates if g["id"] == gate)["cases"][case]["input"]
