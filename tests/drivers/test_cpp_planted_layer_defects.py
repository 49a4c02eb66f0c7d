"""The C++ port's planted layer defects (spec/model-taps.md MT-4.3, docs/divergence.md): -DGATES_PLANT_LAYER_DEFECTS
builds a driver of its own (build/cpp-plant-layer-defects; the production driver never has them) in which the
implementation setting `planted-defect` plants one of the five defects of gates/rows/model_taps/known_bad.py in layer
2 of the decoder. `gates diverge MODEL-TAPS --gate decoder-taps`, judging that build as an implementation declared
here, localizes each to layer 2 and the tap where the Python port's shows first; the unplanted C++ port is drift with
no break, whatever the setting says."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from _vllm_gates.definitions.config import load_config
from _vllm_gates.definitions.implementations import Implementation
from _vllm_gates.definitions.project import load_project
from _vllm_gates.taps.diverge import Options, run_diverge
from gates.rows.model_taps import known_bad
from tests.drivers.conftest import ROOT, build_driver

pytestmark = pytest.mark.cpu

PLANTED_BUILD = ROOT / "build" / "cpp-plant-layer-defects"


@pytest.fixture(scope="module")
def planted_driver() -> Path:
    return build_driver(PLANTED_BUILD, "-DGATES_PLANT_LAYER_DEFECTS")


def _diverge(driver: Path, settings: dict[str, str], case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
             gate: str = "decoder-taps") -> tuple[int, str, dict]:
    """`gates diverge MODEL-TAPS --gate GATE --case CASE --impl under-test`, the implementation `under-test` being
    ``driver`` with ``settings``, declared beside the project's own: (exit code, its output, its JSON report)."""
    config = load_config(ROOT)
    assert config is not None
    under_test = Implementation("under-test", command=(str(driver),), settings=tuple(sorted(settings.items())))
    project = load_project(dataclasses.replace(config, implementations=config.implementations + (under_test,)))
    report = tmp_path / "diverge.json"
    code = run_diverge(project, Options("MODEL-TAPS", gate, case, impl="under-test", json=str(report)))
    captured = capsys.readouterr()
    return code, captured.out + captured.err, (json.loads(report.read_text(encoding="utf-8")) if report.exists() else {})


@pytest.mark.parametrize("name", sorted(known_bad.FIRST_TAP))
def test_each_planted_defect_is_a_localized_break_at_its_layer_and_tap(
        planted_driver: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    case = "four-layers-tp2" if name == "o-proj-partial-dropped" else "four-layers-8-tokens"  # a tp defect: tp 2
    code, out, report = _diverge(planted_driver, {"planted-defect": name}, case, tmp_path, capsys)
    tap = f"layers.{known_bad.PLANTED_LAYER}.{known_bad.FIRST_TAP[name]}"
    assert code == 1, out[-3000:]
    assert f"LOCALIZED BREAK at layer {known_bad.PLANTED_LAYER}, tap {tap}:" in out, out[-3000:]
    assert report["impl"] == "under-test" and report["exit_code"] == 1


def test_a_rank_partial_dropped_by_the_reduce_is_named_with_its_rank(planted_driver: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    name = "o-proj-partial-dropped"
    code, out, report = _diverge(planted_driver, {"planted-defect": name}, "four-layers-tp2-rank-partials", tmp_path,
                                 capsys, gate="decoder-rank-partials")
    tap, rank = known_bad.RANK_FIRST_TAP[name]
    layer = known_bad.PLANTED_LAYER
    assert code == 1, out[-3000:]
    assert f"LOCALIZED BREAK at layer {layer}, rank {rank}, tap layers.{layer}.{tap}:" in out, out[-3000:]
    assert f"rank {rank}'s partial is missing from the reduce" in out, out[-3000:]  # its partial gathered, right
    found = report["classification"]
    assert (found["layer"], found["rank"], found["tap"]) == (layer, rank, f"layers.{layer}.{tap}")


def test_the_unplanted_port_with_its_partials_is_drift(driver: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, out, report = _diverge(driver, {}, "four-layers-tp2-rank-partials", tmp_path, capsys,
                                 gate="decoder-rank-partials")
    assert code == 0 and "DRIFT, no localized break" in out, out[-3000:]
    assert report["classification"]["rank"] is None
    assert any(".rank1" in tap["name"] for tap in report["taps"])  # the partials were judged


def test_a_rank_partial_dropped_at_tp_1_drops_nothing(planted_driver: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _diverge(planted_driver, {"planted-defect": "o-proj-partial-dropped"}, "four-layers-8-tokens",
                            tmp_path, capsys)
    assert code == 0 and "DRIFT, no localized break" in out, out[-3000:]


@pytest.mark.parametrize("settings", [{}, {"planted-defect": "k-v-swapped"}], ids=["no-setting", "a-defect-named"])
def test_the_unplanted_port_is_drift_with_no_break(driver: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    settings: dict[str, str]) -> None:
    code, out, report = _diverge(driver, settings, "four-layers-8-tokens", tmp_path, capsys)
    assert code == 0, out[-3000:]
    assert "DRIFT, no localized break" in out and "the argmax agrees at all 8 positions" in out
    assert report["exit_code"] == 0


def test_the_planted_build_refuses_a_defect_it_does_not_plant(planted_driver: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _diverge(planted_driver, {"planted-defect": "rope-base-right"}, "four-layers-8-tokens", tmp_path, capsys)
    assert code == 3, out[-3000:]
    assert "planted-defect is 'rope-base-right'" in out and "o-proj-partial-dropped" in out, out[-3000:]
