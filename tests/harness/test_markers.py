"""Markers: gpu items skip naming CUDA here; `pytest -m X` and `gates run --marker X` run the same gate items."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.cpu

PLAIN_TESTS = '''import pytest


def test_unmarked():
    pass


@pytest.mark.gpu
def test_gpu_marked():
    pass
'''


@pytest.fixture
def mixed(example):
    """The example with a gpu gate, a gate on cpu and gpu, a dist gate and a plain test module."""
    example.add_gate("on-gpu", "[gpu]")
    example.add_gate("on-cpu-and-gpu", "[cpu, gpu]")
    example.add_gate("spawns", "[cpu, dist]")
    example.write("test_plain.py", PLAIN_TESTS)
    return example


def test_gpu_items_skip_with_a_reason_naming_cuda(mixed, no_cuda):
    result = mixed.pytest("-rs", "gates")
    result.stdout.fnmatch_lines(["*SKIPPED* gpu gate skipped: no CUDA device (torch.cuda.is_available() is False)"])
    result.assert_outcomes(passed=14, skipped=14)
    assert result.ret == 1, "the row claims DONE, and skipped gpu gates cannot back DONE: pytest says so as gates run does"
    assert mixed.gates("run").code == 1
    run, report = mixed.run_json("--marker", "gpu")
    gpu_items = [i for i in report["items"] if i["gate"] in ("on-gpu", "on-cpu-and-gpu")]
    assert len(gpu_items) == 14 and {i["outcome"] for i in gpu_items} == {"skipped"}
    assert all("CUDA" in i["detail"] for i in gpu_items)
    verdicts = {g["gate"]: g["verdict"] for g in mixed.row(report)["gates"]}
    assert verdicts == {"page-bytes": "UNPROVEN", "on-gpu": "SKIPPED", "on-cpu-and-gpu": "SKIPPED", "spawns": "UNPROVEN"}, \
        "every gate of the row is shown under a marker; those the marker left out are UNPROVEN"


@pytest.mark.parametrize("marker", ["cpu", "gpu", "dist"])
def test_pytest_m_and_gates_run_marker_run_the_same_items(mixed, marker):
    by_pytest = {node: outcome for node, outcome in mixed.outcomes("-m", marker).items() if node.startswith("gates/")}
    _, report = mixed.run_json("--marker", marker)
    by_gates = {i["nodeid"]: i["outcome"] for i in report["items"]}
    assert by_pytest == by_gates
    gates = {node.split("::")[1] for node in by_gates}
    expected = {"cpu": {"page-bytes", "on-cpu-and-gpu", "spawns"}, "gpu": {"on-gpu", "on-cpu-and-gpu"}, "dist": {"spawns"}}
    assert gates == expected[marker]
    assert len(by_gates) == 7 * len(expected[marker])


def test_unmarked_tests_count_as_cpu(mixed):
    cpu = mixed.outcomes("-m", "cpu")
    assert cpu["test_plain.py::test_unmarked"] == "passed"
    assert "test_plain.py::test_gpu_marked" not in cpu
    not_cpu = mixed.outcomes("-m", "not cpu")
    assert "test_plain.py::test_unmarked" not in not_cpu
    assert "test_plain.py::test_gpu_marked" in not_cpu


def test_cpu_and_not_dist_leaves_the_dist_gate_out(mixed):
    gates = {node.split("::")[1] for node in mixed.outcomes("-m", "cpu and not dist") if node.startswith("gates/")}
    assert gates == {"page-bytes", "on-cpu-and-gpu"}


def test_a_definition_error_item_is_selected_by_every_marker(example):
    """A broken gate must not vanish under a marker filter: its error item (the gate's own, issue 25: the file's
    other gates still run) carries cpu, gpu and dist."""
    example.edit("markers: [cpu]", "markers: [cpu, tpu]")
    for marker in ("cpu", "gpu", "dist"):
        assert example.outcomes("-m", marker) == {"gates/rows/example/gate.yaml::definition[page-bytes]": "failed"}
        assert example.gates("run", "--marker", marker).code == 3


def test_a_requirement_is_checked_only_when_a_selected_item_needs_it(example, monkeypatch):
    """`-m cpu` deselects the gpu items before their requirement is asked for: the judge never imports torch for it."""
    from _vllm_gates.definitions import requirements

    example.add_gate("on-gpu", "[gpu]")
    asked = []
    monkeypatch.setitem(requirements.DETECTORS, "cuda", lambda project: asked.append("cuda") or "no CUDA device (test)")
    example.pytest("-m", "cpu", "gates").assert_outcomes(passed=7)
    assert asked == []
    result = example.pytest("-rs", "-m", "gpu", "gates")
    result.stdout.fnmatch_lines(["*SKIPPED* gpu gate skipped: no CUDA device (test)"])
    assert asked, "the gpu items were selected: their requirement was checked"
