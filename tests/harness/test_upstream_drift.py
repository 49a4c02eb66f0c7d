"""`gates upstream-drift --to VERSION` (issue 13, item 5): the upstream gates' oracles asked the same inputs under the
pinned release and another one, each in its own process, and what changed reported per row and operation. A toy
upstream package, `toyup`, is installed in three folders as releases 1.0 (the pin), 2.0 and 3.0."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu

RELEASES = {
    # 1.0: the pin. Pages of K and V; a negative count refused.
    "1.0": '''
def page_bytes(block_size, heads, head_size, dtype_bytes):
    if min(block_size, heads, head_size, dtype_bytes) < 0:
        raise ValueError("heads must be >= 0")
    return 2 * block_size * heads * head_size * dtype_bytes
''',
    # 2.0: from 4 heads on, a third tensor per page; a reworded refusal.
    "2.0": '''
def page_bytes(block_size, heads, head_size, dtype_bytes):
    if min(block_size, heads, head_size, dtype_bytes) < 0:
        raise ValueError("a negative size")
    return (3 if heads >= 4 else 2) * block_size * heads * head_size * dtype_bytes
''',
    # 3.0: the function the adapter calls is gone.
    "3.0": "def page_size(*sizes):\n    return 0\n",
    # 4.0: cannot run on this machine at all, whatever it is asked.
    "4.0": "def page_bytes(*sizes):\n    raise RuntimeError('Failed to infer device type')\n",
}
ADAPTER = '''"""The toy upstream's page bytes, imported on the call (as upstream/ adapters import vLLM)."""


def page_bytes(block_size, heads, head_size, dtype_bytes):
    import toyup

    return toyup.page_bytes(block_size, heads, head_size, dtype_bytes)
'''


def _release(folder: Path, version: str) -> Path:
    (folder / "toyup").mkdir(parents=True)
    (folder / "toyup" / "__init__.py").write_text(RELEASES[version], encoding="utf-8")
    info = folder / f"toyup-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: toyup\nVersion: {version}\n", encoding="utf-8")
    return folder


@pytest.fixture
def drift_project(example, tmp_path):
    """The example project pinning toyup 1.0, with one upstream gate over the toy adapter; the three releases."""
    text = example.read("pyproject.toml").replace("[tool.pytest.ini_options]", """[tool.vllm-gates.upstream]
package = "toyup"
version = "1.0"

[tool.vllm-gates.markers]
cpu = "runs on any machine"
upstream = { help = "compares with the pinned upstream release", requires = "upstream" }

[tool.pytest.ini_options]""")
    example.write("pyproject.toml", text)
    example.write("example_row/toy_upstream.py", ADAPTER)
    block = example.gate_block("upstream-page-bytes", "[upstream]").replace("example_row.oracle:counted_page_bytes",
                                                                            "example_row.toy_upstream:page_bytes")
    example.write("gates/rows/example/gate.yaml", example.read() + block)
    sites = {v: _release(tmp_path / f"toyup-{v}", v) for v in RELEASES}
    return example, sites


def _drift(example, sites, to: str, *args: str):
    out = example.root / "out" / "drift.json"
    result = example.gates("upstream-drift", "--to", to, "--site", str(sites[to]), "--from-site", str(sites["1.0"]),
                           "--examples", "30", "--json", str(out), *args)
    return result, (json.loads(out.read_text(encoding="utf-8")) if out.exists() else None)


def test_what_changed_between_the_releases_is_reported_per_row_and_operation(drift_project):
    example, sites = drift_project
    result, report = _drift(example, sites, "2.0")
    assert result.code == 0, result.text
    assert report["from"]["version"] == "1.0" and report["to"]["version"] == "2.0" and report["drifted"] is True
    [gate] = report["gates"]
    assert (gate["row"], gate["gate"], gate["operation"]) == ("EXAMPLE-ROW", "upstream-page-bytes", "upstream-page-bytes")
    assert gate["inputs"] == gate["same"] + gate["changed"] + gate["unavailable"] and gate["unavailable"] == 0
    assert gate["kinds"]["message"] == 1  # the negative-heads case: same error, reworded
    assert gate["kinds"]["value"] >= 1 and gate["same"] >= 1  # drawn examples with 4 or 5 heads changed, others not
    shown = {e["source"]: e for e in gate["examples"]}
    assert shown["case negative-heads"]["from"] == "raises ValueError: heads must be >= 0"
    assert shown["case negative-heads"]["to"] == "raises ValueError: a negative size"
    for example_shown in (e for e in gate["examples"] if e["kind"] == "value"):
        assert "heads: 4" in example_shown["input"] or "heads: 5" in example_shown["input"]
    assert "upstream drift: toyup 1.0 (the pin" in result.out and "upstream-page-bytes (upstream-page-bytes)" in result.out


def test_check_fails_on_drift_and_passes_where_nothing_changed(drift_project, tmp_path):
    example, sites = drift_project
    assert _drift(example, sites, "2.0", "--check")[0].code == 1
    sites["1.0b"] = _release(tmp_path / "again", "1.0")
    out = example.root / "out" / "same.json"
    result = example.gates("upstream-drift", "--to", "1.0", "--site", str(sites["1.0b"]), "--from-site", str(sites["1.0"]),
                           "--check", "--json", str(out))
    assert result.code == 0, result.text
    assert json.loads(out.read_text())["drifted"] is False
    assert "no drift: every input gave the same outcome under 1.0 and 1.0" in result.out


def test_an_adapter_that_cannot_run_under_the_other_release_is_unavailable_not_changed(drift_project):
    example, sites = drift_project
    result, report = _drift(example, sites, "3.0")
    assert result.code == 0, result.text
    [gate] = report["gates"]
    assert gate["unavailable"] == gate["inputs"] and gate["changed"] == 0
    assert gate["unavailable_reason"] == "AttributeError: module 'toyup' has no attribute 'page_bytes'"


def test_a_release_that_raises_one_error_for_every_input_cannot_run_here(drift_project):
    example, sites = drift_project
    result, report = _drift(example, sites, "4.0")
    assert result.code == 0, result.text
    [gate] = report["gates"]
    assert gate["unavailable"] == gate["inputs"] and gate["changed"] == 0
    assert gate["unavailable_reason"] == "every input raises RuntimeError: Failed to infer device type"


def test_a_folder_holding_another_release_than_named_is_refused(drift_project):
    example, sites = drift_project
    result = example.gates("upstream-drift", "--to", "2.0", "--site", str(sites["3.0"]), "--from-site", str(sites["1.0"]))
    assert result.code == 3
    assert f"toyup 2.0 was to be compared ({sites['3.0']}), but that path holds 3.0" in result.err


@pytest.mark.parametrize("args, message", [
    (["--to", "2.0"], "toyup 2.0 is not installed beside the pin: no folder"),
    (["--to", "1.0"], "--to 1.0 is the pinned release; name another one"),
    (["--to", "2.0", "--site", "/nonexistent/toyup"], "no folder /nonexistent/toyup; or give --site DIR"),
    (["--to", "2.0", "--examples", "-1"], "--examples -1: expected a count >= 0"),
    (["--to", "2.0", "--timeout", "0"], "--timeout 0: expected seconds > 0"),
])
def test_usage_errors_name_the_flag_and_the_value(drift_project, args, message):
    example, _ = drift_project
    result = example.gates("upstream-drift", *args)
    assert result.code == 2, result.text
    assert message in result.err


def test_a_release_that_is_not_a_version_is_refused_by_the_flag(drift_project):
    example, _ = drift_project
    done = subprocess.run([sys.executable, "-m", "_vllm_gates.frontends.cli", "--root", str(example.root), "upstream-drift",
                           "--to", "latest"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "argument --to: expected an exact release such as 0.25.0, got 'latest'" in done.stderr
