"""What the pytest11 entry costs a pytest session (issue 27 item 4: at most 10 ms), beside the engine's plugin it
replaced as the entry, measured side by side in one run.

Each round starts two fresh interpreters, interleaved, that import pytest (a session has it already) and then time
the import of one module: `_vllm_gates.frontends.pytest_entry` (and its decision on an unrelated project's pyproject.toml,
the work it adds to every session there; tomllib is imported first, as pytest has when it found that file) or
`_vllm_gates.frontends.plugin` (the whole engine). Medians over the rounds.

Exit 1 when the entry's median import is over the target.

Usage: python ci/bench/bench_entry_import.py [--rounds N]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET_MS = 10.0
PROBE = """
import json, sys, time
from pathlib import Path
import pytest
start = time.perf_counter()
module = __import__(sys.argv[1], fromlist=["_"])
imported = time.perf_counter() - start
decided = None
if hasattr(module, "engine_wanted"):
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli
    start = time.perf_counter()
    assert module.engine_wanted(Path(sys.argv[2])) is False
    decided = time.perf_counter() - start
print(json.dumps({"import_s": imported, "decide_s": decided}))
"""


def measure(module: str, project: Path) -> dict[str, float | None]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    ran = subprocess.run([sys.executable, "-c", PROBE, module, str(project)], env=env, capture_output=True, text=True,
                         check=True, timeout=120)
    return json.loads(ran.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15, help="fresh interpreters per module (default 15)")
    rounds = parser.parse_args().rounds
    entry, engine, decide = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "pyproject.toml").write_text('[project]\nname = "unrelated"\n\n[tool.black]\nline-length = 100\n',
                                                encoding="utf-8")
        measure("_vllm_gates.frontends.plugin", project)  # warm the bytecode caches of both before timing
        for _ in range(rounds):
            found = measure("_vllm_gates.frontends.pytest_entry", project)
            entry.append(found["import_s"] * 1e3)
            decide.append(found["decide_s"] * 1e3)
            engine.append(measure("_vllm_gates.frontends.plugin", project)["import_s"] * 1e3)
    med_entry, med_engine, med_decide = (statistics.median(values) for values in (entry, engine, decide))
    print(f"rounds: {rounds} (medians; min..max)")
    print(f"import _vllm_gates.frontends.pytest_entry      {med_entry:8.2f} ms  ({min(entry):.2f}..{max(entry):.2f})")
    print(f"  its decision, unrelated project    {med_decide:8.2f} ms  ({min(decide):.2f}..{max(decide):.2f})")
    print(f"import _vllm_gates.frontends.plugin (engine)   {med_engine:8.2f} ms  ({min(engine):.2f}..{max(engine):.2f})")
    met = med_entry <= TARGET_MS
    print(f"engine / entry: {med_engine / med_entry:.0f}x; entry and decision {med_entry + med_decide:.2f} ms")
    print(f"target: the entry's import at most {TARGET_MS:.0f} ms: {'met' if met else 'MISSED'}")
    if not met:
        sys.exit(1)


if __name__ == "__main__":
    main()
