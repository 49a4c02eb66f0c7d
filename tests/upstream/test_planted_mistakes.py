"""Issue 13, "Done when": a mistake the port and its own oracle once shared, planted back, fails an upstream gate,
and every non-upstream gate that shared it now fails too. Each planted mistake is a known-bad that several gates
list; `--gates-audit` runs them, and a known-bad item passes when its gate rejects it. Runs where vLLM is installed
(the upstream job); skipped elsewhere."""
from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.upstream import pinned  # noqa: F401  (skips this module unless the pinned vLLM is installed)

pytestmark = pytest.mark.upstream
ROOT = Path(__file__).resolve().parents[2]
TP_GATES = "gates/rows/backend_distributed_tp/gate.yaml"

# planted mistake (a known-bad) -> the gates that must reject it: (gate, carries the upstream marker)
PLANTED = {
    # DCP groups as consecutive chunks when pcp > 1 (vLLM 0.33.0 spans PCP first): impl and oracle shared it.
    "dcp-ignores-pcp": {("group-table", False), ("rank-group-every-rank", False),
                        ("group-table:upstream", True), ("rank-group-every-rank:upstream", True)},
    # DCP must divide TP whatever PCP is (vLLM 0.33.0: 1, pcp or tp*pcp when pcp > 1): impl and oracle shared it.
    "dcp-rule-ignores-pcp": {("parallel-dims-validation", False), ("dcp-size-rule", False),
                             ("dcp-size-rule:upstream", True)},
}


@pytest.fixture(scope="module")
def audit(tmp_path_factory) -> dict[tuple[str, str], str]:
    """{(gate, known-bad): junit outcome} of the TP row's audit, restricted to the planted known-bads."""
    junit = tmp_path_factory.mktemp("audit") / "audit.xml"
    keyword = " or ".join(PLANTED)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", TP_GATES, "--gates-audit",
                           "-k", keyword, f"--junitxml={junit}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900, env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"})
    assert junit.exists(), done.stdout[-3000:] + done.stderr[-2000:]
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")  # known_bad[NAME], in class ...gate.yaml.GATE
        if not name.startswith("known_bad["):
            continue
        gate, bad = case.get("classname", "").rsplit(".", 1)[-1], name[len("known_bad["):-1]
        failed = case.find("failure") is not None or case.find("error") is not None
        skipped = case.find("skipped") is not None
        outcomes[(gate, bad)] = "failed" if failed else "skipped" if skipped else "passed"
    return outcomes


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_a_planted_shared_mistake_fails_the_upstream_gate_and_every_gate_that_shared_it(audit, planted):
    expected = PLANTED[planted]
    assert any(is_upstream for _, is_upstream in expected) and any(not u for _, u in expected)
    found = {gate: outcome for (gate, bad), outcome in audit.items() if bad == planted}
    assert set(found) == {gate for gate, _ in expected}, f"the gates listing {planted}: {sorted(found)}"
    assert found == dict.fromkeys(found, "passed"), f"gates that did not reject {planted}: {found}"
