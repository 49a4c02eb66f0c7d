"""Harness speed targets (issue: harness core), measured side by side in one run and printed as ratios.

1. `gates list` (the whole process, as a user runs it) takes under 0.5 s beside `python -c pass`, with bytecode
   caching on and off, and never imports torch.
2. Each explicit case of a gate costs at most 1.15x a case of the same plain `pytest.mark.parametrize` test: the
   per-item slope, seconds per extra case from the difference of two sizes (SIZES, e.g. 200 vs 2,000 cases), so
   that what every run pays once (interpreter, pytest and plugin start-up, the fork server) does not hide it.

Exit status 1 when a target is missed. Run: python ci/bench/bench_harness.py [--rounds N] [--sizes 200,2000]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SIZES = (200, 2000)  # the two numbers of cases whose difference gives the per-item slope

TIMED_PYTEST = textwrap.dedent("""
    import sys, time, pytest
    start = time.perf_counter()
    code = pytest.main(sys.argv[1:])
    print("ELAPSED", time.perf_counter() - start)
    sys.exit(code)
""")


def _project(tmp: Path, cases: int) -> None:
    """A root holding one gate of ``cases`` cases and one parametrized test over the same function and data."""
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
    body = "".join(f"      c{i}:\n        input: {{block_size: {i}, heads: {i % 7 + 1}}}\n        expect: {2 * i * (i % 7 + 1)}\n" for i in range(cases))
    (tmp / "gates" / "rows" / "bench" / "gate.yaml").write_text(
        "row: BENCH-ROW\ntitle: bench\nspec: spec/bench.md\ngates:\n  - id: page\n    milestone: M1\n    covers: [BENCH-1.1]\n"
        "    markers: [cpu]\n    impl: benchpkg.code:page\n    known_bad: {bad: benchpkg.code:bad}\n    cases:\n" + body)
    data = ", ".join(f"({i}, {i % 7 + 1}, {2 * i * (i % 7 + 1)})" for i in range(cases))
    (tmp / "tests" / "test_plain.py").write_text(
        "import pytest\nfrom benchpkg.code import page\n\n"
        f"@pytest.mark.cpu\n@pytest.mark.parametrize('block_size,heads,expected', [{data}])\n"
        "def test_page(block_size, heads, expected):\n    assert page(block_size, heads) == expected\n")
    (tmp / "pyproject.toml").write_text('[tool.vllm-gates]\nallowed-roots = ["benchpkg"]\n\n[tool.pytest.ini_options]\npythonpath = ["."]\n')


def _timed_pytest(tmp: Path, target: str, cases: int) -> float:
    """Seconds (wall: the gate's calls run in worker processes) of one pytest session inside its process."""
    done = subprocess.run([sys.executable, "-c", TIMED_PYTEST, target, "-q", "-p", "no:cacheprovider", "-k", "not known_bad and not audit"],
                          cwd=tmp, capture_output=True, text=True)
    # the gate's known-bad and audit items are deselected, so its row is INCOMPLETE (exit 1): only the cases are timed
    if done.returncode not in (0, 1) or f"{cases} passed" not in done.stdout:
        raise SystemExit(f"bench run of {target} failed:\n{done.stdout}\n{done.stderr}")
    return float(next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("ELAPSED")))


def _gates_command() -> list[str]:
    """The `gates` console script beside this interpreter (what a user runs), else `python -m _vllm_gates.frontends.cli`."""
    script = Path(sys.executable).with_name("gates")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "_vllm_gates.frontends.cli"]


def _gates_list_seconds(env: dict[str, str]) -> float:
    """Wall time of one whole `gates list` process in this repository (start-up, imports, reading every gate file)."""
    return _wall([*_gates_command(), "--root", str(REPO), "list"], env=env)


def _gates_list_imports_torch() -> bool:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "_vllm_gates.frontends.cli", "--root", str(REPO), "list"],
                          capture_output=True, text=True, check=True)
    return any(line.rsplit("|", 1)[-1].strip().split(".")[0] == "torch" for line in done.stderr.splitlines())


def _environments() -> list[tuple[str, dict[str, str]]]:
    """`gates list` is timed with bytecode caching as this environment has it and with the other setting:
    PYTHONDONTWRITEBYTECODE=1 (set on some machines) keeps a stale or missing .pyc from being written."""
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return [("PYTHONDONTWRITEBYTECODE unset", base), ("PYTHONDONTWRITEBYTECODE=1", {**base, "PYTHONDONTWRITEBYTECODE": "1"})]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--sizes", type=lambda text: tuple(int(x) for x in text.split(",")), default=SIZES,
                        help="the two numbers of cases whose difference gives the per-case slope (default 200,2000)")
    args = parser.parse_args()
    if len(args.sizes) != 2 or not 0 < args.sizes[0] < args.sizes[1]:
        parser.error("--sizes: two numbers of cases, the smaller first (e.g. 200,2000)")
    failures = []

    _wall([*_gates_command(), "--root", str(REPO), "list"])  # a first run writes the bytecode caches that are missing
    torch_loaded = _gates_list_imports_torch()
    for label, env in _environments():
        bare_times, list_times = [], []
        for _ in range(args.rounds):  # interleaved, so drift on a noisy machine hits both alike
            bare_times.append(_wall([sys.executable, "-c", "pass"], env=env))
            list_times.append(_gates_list_seconds(env))
        bare, listing = statistics.median(bare_times), statistics.median(list_times)
        print(f"gates list ({label}): median {listing * 1000:.0f} ms wall, python -c pass {bare * 1000:.0f} ms "
              f"(ratio {listing / bare:.1f}; medians of {args.rounds} whole processes); target < 500 ms")
        if listing >= 0.5:
            failures.append(f"gates list startup ({label})")
    print(f"gates list imports torch: {torch_loaded}; target: no")
    if torch_loaded:
        failures.append("gates list imports torch")

    small, large = args.sizes
    tmp = Path(tempfile.mkdtemp(prefix="gates-bench-"))
    try:
        roots = {}
        for cases in (small, large):
            roots[cases] = tmp / f"cases-{cases}"
            roots[cases].mkdir()
            _project(roots[cases], cases)
        times: dict[tuple[str, int], list[float]] = {(kind, cases): [] for kind in ("gate", "plain") for cases in (small, large)}
        for _ in range(args.rounds):  # interleaved, so drift on a noisy machine hits both suites and both sizes alike
            for cases in (small, large):
                times["gate", cases].append(_timed_pytest(roots[cases], "gates/rows/bench/gate.yaml", cases))
                times["plain", cases].append(_timed_pytest(roots[cases], "tests/test_plain.py", cases))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    median = {what: statistics.median(found) for what, found in times.items()}
    slope = {kind: (median[kind, large] - median[kind, small]) / (large - small) for kind in ("gate", "plain")}
    for kind, label in (("gate", "gate"), ("plain", "parametrize")):
        print(f"{label}: {small} cases {median[kind, small] * 1000:.0f} ms, {large} cases {median[kind, large] * 1000:.0f} ms "
              f"(medians of {args.rounds}); per extra case {slope[kind] * 1e6:.0f} us; "
              f"fixed cost {(median[kind, small] - small * slope[kind]) * 1000:.0f} ms")
    if slope["plain"] <= 0:
        print(f"per-case slope of the plain suite is not positive ({slope['plain'] * 1e6:.0f} us): too noisy to compare; rerun with more --rounds")
        failures.append("harness overhead (unmeasured)")
    else:
        ratio = slope["gate"] / slope["plain"]
        print(f"per-case cost, gate / parametrize: {slope['gate'] * 1e6:.0f} us / {slope['plain'] * 1e6:.0f} us = ratio {ratio:.3f}; "
              "target <= 1.15")
        if ratio > 1.15:
            failures.append("harness overhead per case")
    print("PASS" if not failures else f"MISSED: {', '.join(failures)}")
    return 1 if failures else 0


def _wall(command: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
