"""Claims rest on evidence (docs/evidence.md): a run judges only what it ran; evidence from other machines merges in
where its fingerprint matches the tree; stale, simulated and conflicting evidence never backs a claim."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from _vllm_gates.run.evidence import SIMULATED_DEVICE_ENV

pytestmark = pytest.mark.cpu

REPO = Path(__file__).resolve().parents[2]
RUN_SCHEMA = json.loads((REPO / "src" / "_vllm_gates" / "definitions" / "schema" / "run.schema.json").read_text(encoding="utf-8"))


@pytest.fixture
def with_gpu_gate(example):
    """The example row with a second gate that only a CUDA machine runs."""
    example.add_gate("on-gpu", "[gpu]")
    return example


def _as_real_gpu(path: Path) -> Path:
    """The file a real GPU machine would have written: the same run, not marked simulated."""
    document = json.loads(path.read_text(encoding="utf-8"))
    document["evidence"]["simulated"] = False
    document["evidence"]["device"] = {"cpu": "x86", "gpu": "NVIDIA H200", "gpu_memory_bytes": 150 * 2**30, "simulated": False}
    for row in document["rows"]:
        for gate in row["gates"]:
            if gate["simulated"]:
                gate.update(simulated=False, device="gpu: NVIDIA H200, 150 GiB")
    target = path.with_name("real-" + path.name)
    target.write_text(json.dumps(document), encoding="utf-8")
    return target


def _gpu_run(example, monkeypatch, name: str = "gpu.json") -> tuple[Any, dict[str, Any]]:
    monkeypatch.setenv(SIMULATED_DEVICE_ENV, "recorded fake H200")
    try:
        return example.run_json("--marker", "gpu", name=name)
    finally:
        monkeypatch.delenv(SIMULATED_DEVICE_ENV)


def test_a_gate_the_marker_leaves_out_is_unproven_and_done_is_not_met(with_gpu_gate):
    result, report = with_gpu_gate.run_json("--marker", "cpu")
    gate = with_gpu_gate.gate(report, "on-gpu")
    assert gate["verdict"] == "UNPROVEN" and not gate["executed"]
    assert "deselected by -m 'cpu'" in gate["reason"]
    assert not with_gpu_gate.row(report)["claim"]["claim_met"]
    assert result.code == 6, "nothing failed, but DONE rests on a gate this run did not execute"
    assert "EXAMPLE-ROW::on-gpu: UNPROVEN: deselected by -m 'cpu'; no usable evidence" in result.out
    pytest_run = with_gpu_gate.pytest("-m", "cpu", "--junitxml=out/junit.xml", "gates")
    assert pytest_run.ret == 6, "pytest and gates run give one meaning to a claim"
    junit = (with_gpu_gate.root / "out" / "junit.xml").read_text(encoding="utf-8")
    assert 'classname="vllm-gates.EXAMPLE-ROW.(row)" name="claim[DONE]"' in junit
    assert 'failure message="UNPROVEN: claims DONE, but no run or evidence here proves on-gpu"' in junit


def test_partial_lets_gpu_gates_be_unproven_but_not_others(with_gpu_gate):
    with_gpu_gate.set_roadmap({"EXAMPLE-ROW": ("PARTIAL", {"M1": "PARTIAL"})})
    assert with_gpu_gate.gates("run", "--marker", "cpu").code == 0
    with_gpu_gate.add_gate("spawns", "[dist]")
    result = with_gpu_gate.gates("run", "--marker", "cpu")
    assert result.code == 6
    assert "claims PARTIAL, but gates that are not gpu gates were skipped or not proven: spawns" in result.out


def test_a_run_that_could_run_nothing_here_is_not_unproven(with_gpu_gate, no_cuda):
    result = with_gpu_gate.gates("run", "--marker", "gpu")
    assert result.code == 7, "every selected item skipped for want of CUDA: nothing could run here"


def test_rows_without_gate_file_and_milestones_without_gates_show_under_every_marker(example):
    example.set_roadmap({"EXAMPLE-ROW": ("DONE", {"M1": "DONE", "M2": "DONE"}), "NO-FILE-ROW": ("DONE", {"M1": "DONE"})})
    result, report = example.run_json("--marker", "cpu")
    rows = {r["row"]: r for r in report["rows"]}
    assert rows["NO-FILE-ROW"]["claim"]["verdict"] == "EMPTY"
    milestones = {m["milestone"]: m for m in rows["EXAMPLE-ROW"]["milestones"]}
    assert milestones["M2"]["verdict"] == "EMPTY" and milestones["M2"]["reason"] == "no gate covers this milestone"
    assert result.code == 1


def test_an_untouched_tree_gives_the_runs_verdicts_and_an_edit_makes_them_stale(example):
    run, report = example.run_json()
    assert run.code == 0
    jsonschema.validate(report, RUN_SCHEMA)
    gate = example.gate(report)
    assert gate["executed"] and len(gate["fingerprint"]) == 64 and "file:example_row/impl.py" in gate["inputs"]
    evidence = str(example.root / "out" / "run.json")
    same, judged = example.gates("verdict", "--evidence", evidence, "--json", str(example.root / "out" / "v.json")), None
    judged = json.loads((example.root / "out" / "v.json").read_text(encoding="utf-8"))
    assert same.code == 0
    assert example.gate(judged)["verdict"] == "PASS" and example.gate(judged)["basis"] == [f"{evidence} (cpu: {_cpu(report)})"]
    assert not example.gate(judged)["executed"], "a verdict on evidence is not first-hand evidence itself"

    example.edit("    return 2 * block_size", "    return 2 * block_size  # unchanged behaviour, changed file", "example_row/impl.py")
    stale = example.gates("verdict", "--evidence", evidence)
    assert stale.code != 0
    assert f"STALE: {evidence} has another fingerprint (file:example_row/impl.py changed)" in stale.out


def _cpu(report: dict[str, Any]) -> str:
    return report["evidence"]["device"]["cpu"]


def test_a_claim_upgrade_in_the_roadmap_makes_the_rows_evidence_stale(example):
    example.set_roadmap({"EXAMPLE-ROW": ("ACTIVE", {"M1": "ACTIVE"})})
    example.run_json()
    example.set_roadmap({"EXAMPLE-ROW": ("DONE", {"M1": "DONE"})})
    result = example.gates("verdict", "--evidence", str(example.root / "out" / "run.json"))
    assert result.code == 6
    assert "(roadmap:EXAMPLE-ROW changed)" in result.out


def test_cpu_and_gpu_evidence_merge_and_simulated_evidence_backs_no_claim(with_gpu_gate, monkeypatch):
    cpu_run, _ = with_gpu_gate.run_json("--marker", "cpu", name="cpu.json")
    gpu_run, gpu_report = _gpu_run(with_gpu_gate, monkeypatch)
    assert (cpu_run.code, gpu_run.code) == (6, 6)
    gpu_gate = with_gpu_gate.gate(gpu_report, "on-gpu")
    assert gpu_gate["simulated"] and gpu_gate["device"] == "gpu: recorded fake H200 (simulated)"
    assert gpu_gate["verdict"] == "UNPROVEN" and "PASS here on a simulated device: it backs no claim" in gpu_gate["reason"]
    assert gpu_report["evidence"]["simulated"] is True

    cpu, gpu = with_gpu_gate.root / "out" / "cpu.json", with_gpu_gate.root / "out" / "gpu.json"
    refused = with_gpu_gate.gates("verdict", "--evidence", str(cpu), "--evidence", str(gpu))
    assert refused.code == 6
    assert f"{gpu} ran on a simulated device (gpu: recorded fake H200 (simulated)): it backs no claim" in refused.out

    real_gpu = _as_real_gpu(gpu)
    merged = with_gpu_gate.gates("verdict", "--evidence", str(cpu), "--evidence", str(real_gpu), "--json", str(cpu.with_name("m.json")))
    assert merged.code == 0, merged.out
    report = json.loads(cpu.with_name("m.json").read_text(encoding="utf-8"))
    assert with_gpu_gate.gate(report, "on-gpu")["basis"] == [f"{real_gpu} (gpu: NVIDIA H200, 150 GiB)"]
    assert with_gpu_gate.gate(report, "page-bytes")["verdict"] == "PASS"
    assert with_gpu_gate.gates("run", "--marker", "cpu", "--evidence", str(real_gpu)).code == 0, \
        "a run adds evidence the same way"


def test_machines_that_disagree_on_one_fingerprint_are_a_failure(example):
    example.run_json()
    passed = example.root / "out" / "run.json"
    document = json.loads(passed.read_text(encoding="utf-8"))
    example.gate(document)["run_verdict"], example.gate(document)["run_reason"] = "FAIL", "failed: properties"
    failed = passed.with_name("other-machine.json")
    failed.write_text(json.dumps(document), encoding="utf-8")
    result = example.gates("verdict", "--evidence", str(passed), "--evidence", str(failed))
    assert result.code == 1
    assert f"EXAMPLE-ROW::page-bytes: FAIL: FAIL on {failed} (cpu: " in result.out


@pytest.mark.parametrize("content, message", [
    (None, "cannot read it"),
    ("{not json", "not a JSON run report"),
    ('{"schema": "vllm-gates/run/2"}', "schema 'vllm-gates/run/2', expected 'vllm-gates/run/3'"),
    ('{"schema": "vllm-gates/run/3", "rows": []}', "malformed run report: missing field 'meta'"),
])
def test_an_unreadable_evidence_file_is_a_usage_error_naming_it(example, content, message):
    path = example.root / "evidence.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    for command in (("verdict",), ("run",)):
        result = example.gates(*command, "--evidence", str(path))
        assert result.code == 2
        assert f"--evidence {path}: {message}" in result.err


def test_m3_claimed_done_is_not_met_by_a_cpu_run_and_is_met_by_cpu_and_gpu_evidence(tmp_path):
    """The done-when of the issue, on a copy of this repository with ROAD-V1-MEM M3 claimed DONE."""
    import shutil
    import subprocess
    import sys

    for name in ("impl", "oracles", "gates", "spec", "upstream", "pyproject.toml"):  # upstream: where vLLM is installed
        source = REPO / name
        (shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__")) if source.is_dir()
         else shutil.copy(source, tmp_path / name))
    roadmap = tmp_path / "spec" / "roadmap.yaml"
    text = roadmap.read_text(encoding="utf-8").replace("state: PARTIAL", "state: DONE")
    roadmap.write_text(text, encoding="utf-8")

    def gates(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "_vllm_gates.frontends.cli", "--root", str(tmp_path), *args],
                              capture_output=True, text=True, cwd=tmp_path, env={**__import__("os").environ, "CI": "true"})

    cpu = tmp_path / "cpu.json"
    run = gates("run", "--marker", "cpu", "ROAD-V1-MEM", "--json", str(cpu))
    assert run.returncode == 6, run.stdout[-2000:]
    assert "ROAD-V1-MEM M3: claims DONE, but no run or evidence here proves profile-on-device" in run.stdout

    document = json.loads(cpu.read_text(encoding="utf-8"))  # the GPU side: the recorded fake device, marked simulated
    for row in document["rows"]:
        for gate in row["gates"]:
            gate["executed"] = gate["gate"] == "profile-on-device"
            if gate["executed"]:
                gate.update(run_verdict="PASS", run_reason="", device="gpu: recorded fake (tests/m3) (simulated)", simulated=True)
    document["evidence"].update(simulated=True)
    gpu = tmp_path / "gpu.json"
    gpu.write_text(json.dumps(document), encoding="utf-8")
    refused = gates("verdict", "--evidence", str(cpu), "--evidence", str(gpu), "ROAD-V1-MEM")
    assert refused.returncode == 6 and "ran on a simulated device" in refused.stdout

    real = _as_real_gpu(gpu)
    merged = gates("verdict", "--evidence", str(cpu), "--evidence", str(real), "ROAD-V1-MEM")
    assert merged.returncode == 0, merged.stdout[-2000:]
    assert "ROAD-V1-MEM  M3         (milestone)" in merged.stdout and "DONE ok" in merged.stdout
