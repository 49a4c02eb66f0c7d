"""`gates diverge` on the MODEL-TAPS row (docs/divergence.md): each planted defect of the row's known-bads, judged in
place of the implementation, is a localized break at exactly its layer and first tap, shrunk to the first
PLANTED_LAYER + 1 layers and its shortest prompt; the Python port itself is drift with no break, nothing to shrink."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gates.rows.model_taps import known_bad

pytestmark = [pytest.mark.cpu, pytest.mark.dist]
ROOT = Path(__file__).resolve().parents[2]
SHORTEST_PROMPT = {name: 1 for name in known_bad.FIRST_TAP} | {"rope-base-wrong": 2}
"""The shortest prefix that keeps each break: one token, except for the wrong RoPE base: RoPE leaves position 0
unrotated whatever its base, so the first token's K is right and the break needs a second position."""


def _diverge(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("PYTEST_", "GATES_"))}
    report = tmp_path / "diverge.json"
    done = subprocess.run([sys.executable, "-m", "_vllm_gates.frontends.cli", "diverge", "MODEL-TAPS", "--gate", "decoder-taps",
                           *args, "--json", str(report)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    return done, (json.loads(report.read_text(encoding="utf-8")) if report.exists() else {})


@pytest.mark.parametrize("name", sorted(known_bad.FIRST_TAP))
def test_each_planted_defect_is_a_localized_break_at_its_layer_and_tap(tmp_path: Path, name: str) -> None:
    case = "four-layers-tp2" if name == "o-proj-partial-dropped" else "four-layers-8-tokens"  # a tp defect: tp 2
    done, report = _diverge(tmp_path, "--case", case, "--known-bad", name)
    tap = f"layers.{known_bad.PLANTED_LAYER}.{known_bad.FIRST_TAP[name]}"
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"LOCALIZED BREAK at layer {known_bad.PLANTED_LAYER}, tap {tap}:" in done.stdout, done.stdout[-3000:]
    assert report["impl"] == f"known-bad {name}" and report["exit_code"] == 1
    assert report["classification"]["tap"] == tap  # the full run's, whatever the shrinking found
    minimal, ids = report["shrink"]["minimal"], [3, 129] if case == "four-layers-8-tokens" else [110, 82]
    assert report["shrink"]["full"]["layers"] == 4
    assert (minimal["layers"], minimal["tap"], minimal["layer"]) == (known_bad.PLANTED_LAYER + 1, tap, known_bad.PLANTED_LAYER)
    assert minimal["ids"] == ids[:SHORTEST_PROMPT[name]], report["shrink"]["runs"]
    assert f"minimal reproduction: {known_bad.PLANTED_LAYER + 1} of 4 layers, the first " in done.stdout


def test_the_port_is_drift_with_no_break(tmp_path: Path) -> None:
    done, report = _diverge(tmp_path, "--case", "four-layers-8-tokens")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "DRIFT, no localized break" in done.stdout
    assert report["exit_code"] == 0 and report["impl"] == "python"
    assert report["shrink"]["sought"] is False and report["shrink"]["runs"] == []  # nothing to shrink


def test_an_unknown_known_bad_is_a_usage_error_naming_the_listed_ones(tmp_path: Path) -> None:
    done, _ = _diverge(tmp_path, "--known-bad", "rope-base-right")
    assert done.returncode == 2
    assert "--known-bad" in done.stderr and "rope-base-wrong" in done.stderr, done.stderr
