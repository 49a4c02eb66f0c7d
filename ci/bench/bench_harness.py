"""Harness speed targets (issue: harness core), measured side by side in one run and printed as ratios.

1. `gates list` starts in under 0.5 s and never imports torch.
2. 200 explicit cases as a gate cost at most 1.15x the same 200 cases as a plain `pytest.mark.parametrize` test.

Exit status 1 when a target is missed. Run: python ci/bench/bench_harness.py [--rounds N]
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CASES = 200

TIMED_PYTEST = textwrap.dedent("""
    import sys, time, pytest
    start = time.perf_counter()
    code = pytest.main(sys.argv[1:])
    print("ELAPSED", time.perf_counter() - start)
    sys.exit(code)
""")


def _project(tmp: Path) -> None:
    """A root holding one gate of CASES cases and one parametrized test over the same function and data."""
    (tmp / "spec").mkdir()
    (tmp / "gates" / "rows" / "bench").mkdir(parents=True)
    (tmp / "benchpkg").mkdir()
    (tmp / "tests").mkdir()
    (tmp / "spec" / "roadmap.yaml").write_text("rows:\n  BENCH-ROW:\n    title: bench\n    state: DONE\n    milestones:\n      M1: {title: bench, state: DONE}\n")
    (tmp / "spec" / "bench.md").write_text("- **BENCH-1.1** pages are counted.\n")
    (tmp / "benchpkg" / "__init__.py").write_text("")
    (tmp / "benchpkg" / "code.py").write_text(
        "def page(block_size, heads):\n    return 2 * block_size * heads\n\n"
        "def bad(block_size, heads):\n    return block_size * heads\n")
    cases = "".join(f"      c{i}:\n        input: {{block_size: {i}, heads: {i % 7 + 1}}}\n        expect: {2 * i * (i % 7 + 1)}\n" for i in range(CASES))
    (tmp / "gates" / "rows" / "bench" / "gate.yaml").write_text(
        "row: BENCH-ROW\ntitle: bench\nspec: spec/bench.md\ngates:\n  - id: page\n    milestone: M1\n    covers: [BENCH-1.1]\n"
        "    markers: [cpu]\n    impl: benchpkg.code:page\n    known_bad: {bad: benchpkg.code:bad}\n    cases:\n" + cases)
    data = ", ".join(f"({i}, {i % 7 + 1}, {2 * i * (i % 7 + 1)})" for i in range(CASES))
    (tmp / "tests" / "test_plain.py").write_text(
        "import pytest\nfrom benchpkg.code import page\n\n"
        f"@pytest.mark.cpu\n@pytest.mark.parametrize('block_size,heads,expected', [{data}])\n"
        "def test_page(block_size, heads, expected):\n    assert page(block_size, heads) == expected\n")
    (tmp / "pyproject.toml").write_text('[tool.vllm-gates]\nallowed-roots = ["benchpkg"]\n\n[tool.pytest.ini_options]\npythonpath = ["."]\n')


def _timed_pytest(tmp: Path, target: str) -> float:
    done = subprocess.run([sys.executable, "-c", TIMED_PYTEST, target, "-q", "-p", "no:cacheprovider", "-k", "not known_bad and not audit"],
                          cwd=tmp, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench run of {target} failed:\n{done.stdout}\n{done.stderr}")
    return float(next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("ELAPSED")))


def _gates_list_seconds() -> tuple[float, bool]:
    probe = ("import sys, time; s = time.perf_counter(); from _vllm_gates.cli import main; import io, contextlib\n"
             "with contextlib.redirect_stdout(io.StringIO()): main(['--root', sys.argv[1], 'list'])\n"
             "print(time.perf_counter() - s, 'torch' in sys.modules)")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", probe, str(REPO)], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    _, torch_loaded = done.stdout.split()
    return wall, torch_loaded == "True"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    failures = []

    bare = statistics.median(_wall([sys.executable, "-c", "pass"]) for _ in range(args.rounds))
    runs = [_gates_list_seconds() for _ in range(args.rounds)]
    listing = statistics.median(wall for wall, _ in runs)
    torch_loaded = any(loaded for _, loaded in runs)
    print(f"gates list: median {listing * 1000:.0f} ms wall (python -c pass: {bare * 1000:.0f} ms); torch imported: {torch_loaded}; target < 500 ms")
    if listing >= 0.5 or torch_loaded:
        failures.append("gates list startup")

    tmp = Path(tempfile.mkdtemp(prefix="gates-bench-"))
    try:
        _project(tmp)
        gate_times, plain_times = [], []
        for _ in range(args.rounds):  # interleaved, so drift on a noisy machine hits both alike
            gate_times.append(_timed_pytest(tmp, "gates/rows/bench/gate.yaml"))
            plain_times.append(_timed_pytest(tmp, "tests/test_plain.py"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    gate, plain = statistics.median(gate_times), statistics.median(plain_times)
    ratio = gate / plain
    print(f"{CASES} cases: gate {gate * 1000:.0f} ms, parametrize {plain * 1000:.0f} ms (medians of {args.rounds}); ratio {ratio:.3f}; target <= 1.15")
    if ratio > 1.15:
        failures.append("harness overhead")
    print("PASS" if not failures else f"MISSED: {', '.join(failures)}")
    return 1 if failures else 0


def _wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
