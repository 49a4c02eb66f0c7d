"""The harness at the scale of a real port (issue: 50,000 gate items loaded and collected near plain pytest).

Builds synthetic projects of N cases in F gate files (trivial impl, expected values written out, one known-bad per
gate) beside an equivalent plain `pytest.mark.parametrize` suite, and measures as CPU time, each process on its
own (os.wait4), side by side in one run:

- `gates list` per case past the start-up (the listing of a 1-case project), target <= 0.1 ms;
- collection, gate suite vs plain (target <= 1.5x), worker processes included (a listing starts one per role);
- the run, gate suite vs plain (target <= 1.15x), for the judge process: the CPU of its worker processes, the price
  of running each gate file's subjects isolated in processes of their own (two or three per file), is reported
  beside it, in all and per gate file (the issue: where the worker processes add cost, measure it there);
- the plain suite is the gate suite's equivalent: a parametrized test of the cases and, per gate, a test that the
  known-bad is rejected on them and one that a result equal to nothing is (the gate's audit item);
- `gates run` vs the pytest run it drives (target <= 1.1x);
- peak memory of the gate run vs the plain run (target <= 2x);
- one gate file of 100,000 cases loads (`gates list` exits 0; --capacity N, 0 skips it).

A ratio is the median over rounds of each round's pair, measured one right after the other, so that the machine's
drift between rounds cancels. Prints each target met or MISSED; exits 1 on a miss. Usage:
    python ci/bench/bench_scale.py [--sizes 1000,10000] [--files 1,100] [--rounds 1]
(the issue's full matrix: --sizes 1000,10000,50000 --files 1,100).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

CASES_PER_GATE = 100

IMPL = '''def page(block_size, heads):
    """A trivial subject: the same arithmetic as the expected values."""
    return 2 * block_size * heads


def page_off_by_one(block_size, heads):
    return 2 * block_size * heads + 1
'''

PYPROJECT = '''[tool.vllm-gates]
roadmap = "spec/roadmap.yaml"
rows = ["gates/rows/*/gate.yaml"]
specs = ["spec/*.md"]
allowed-roots = ["scale_row", "gates"]

[tool.pytest.ini_options]
pythonpath = ["."]
'''


def _cases(start: int, count: int) -> list[tuple[int, int, int]]:
    return [((i % 97) + 1, (i % 13) + 1, 2 * ((i % 97) + 1) * ((i % 13) + 1)) for i in range(start, start + count)]


def write_project(root: Path, cases: int, files: int) -> None:
    """A gated project of ``cases`` cases in ``files`` rows (one gate file each), and `plain/` with the same checks."""
    (root / "scale_row").mkdir(parents=True)
    (root / "scale_row" / "__init__.py").write_text("")
    (root / "scale_row" / "impl.py").write_text(IMPL)
    (root / "gates" / "rows").mkdir(parents=True)
    (root / "gates" / "__init__.py").write_text("")
    (root / "gates" / "rows" / "__init__.py").write_text("")
    (root / "spec").mkdir()
    (root / "spec" / "scale.md").write_text("# Scale\n\n- **SC-1.1** pages are counted\n")
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "plain").mkdir()
    per_file = cases // files
    roadmap = ["rows:"]
    for f in range(files):
        row = f"SCALE-{f}"
        roadmap += [f"  {row}:", f"    title: row {f}", "    state: DONE", "    milestones:",
                    "      M1: {title: pages, state: DONE}"]
        lines = [f"row: {row}", f"title: row {f}", "spec: spec/scale.md", "gates:"]
        written = 0
        for g in range((per_file + CASES_PER_GATE - 1) // CASES_PER_GATE):
            count = min(CASES_PER_GATE, per_file - written)
            lines += [f"  - id: g{g}", "    milestone: M1", "    covers: [SC-1.1]", "    markers: [cpu]",
                      "    impl: scale_row.impl:page", "    cases:"]
            for i, (block, heads, expect) in enumerate(_cases(f * per_file + written, count)):
                lines.append(f"      c{i}: {{input: {{block_size: {block}, heads: {heads}}}, expect: {expect}}}")
            lines += ["    known_bad:", "      off-by-one: scale_row.impl:page_off_by_one"]
            written += count
        folder = root / "gates" / "rows" / f"row{f}"
        folder.mkdir()
        (folder / "__init__.py").write_text("")
        (folder / "gate.yaml").write_text("\n".join(lines) + "\n")
        plain = ["import pytest", "from scale_row.impl import page, page_off_by_one", "",
                 f"CASES = {_cases(f * per_file, per_file)!r}", "WRONG = object()", "",
                 "@pytest.mark.parametrize('block_size, heads, expect', CASES)",
                 "def test_page(block_size, heads, expect):", "    assert page(block_size, heads) == expect", ""]
        for g in range((per_file + CASES_PER_GATE - 1) // CASES_PER_GATE):  # each gate's known-bad must be rejected
            cut = f"CASES[{g * CASES_PER_GATE}:{(g + 1) * CASES_PER_GATE}]"
            plain += [f"def test_g{g}_rejects_off_by_one():",
                      f"    assert any(page_off_by_one(b, h) != e for b, h, e in {cut})", "",
                      f"def test_g{g}_rejects_wrong_everywhere():  # the gate's audit item: a stand-in equal to nothing",
                      f"    assert any(WRONG != e for b, h, e in {cut})", ""]
        (root / "plain" / f"test_row{f}.py").write_text("\n".join(plain))
    (root / "spec" / "roadmap.yaml").write_text("\n".join(roadmap) + "\n")


PROBE = '''"""Loaded with -p: at exit, writes the CPU seconds of the processes this one started and waited for (the
judge's worker processes, which it has ended by then) to $SCALE_PROBE_OUT."""
import atexit
import os
import resource


def _write() -> None:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.environ["SCALE_PROBE_OUT"], "w") as out:
        out.write(repr(usage.ru_utime + usage.ru_stime))


atexit.register(_write)
'''


@dataclass(frozen=True)
class Measured:
    cpu_s: float  # the process and every process it started (worker processes included)
    peak_mib: float
    code: int
    own_cpu_s: float  # the process alone: pytest, or the judge without its worker processes (its exit included)


def measure(command: list[str], cwd: Path) -> Measured:
    """CPU seconds (user + system) of one process with its descendants and of itself alone (the CPU of the processes
    it started, written at its exit by the -p probe that PYTEST_ADDOPTS loads, taken off), and its peak resident
    memory, waited for on its own."""
    with tempfile.TemporaryDirectory(prefix="bench-scale-probe-") as folder:
        (Path(folder) / "scale_probe.py").write_text(PROBE)
        out = Path(folder) / "children-cpu"
        env = {**os.environ, "CI": "true", "PYTEST_ADDOPTS": "-p scale_probe", "SCALE_PROBE_OUT": str(out),
               "PYTHONPATH": os.pathsep.join(p for p in (folder, os.environ.get("PYTHONPATH", "")) if p)}
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        total = usage.ru_utime + usage.ru_stime
        own = total - float(out.read_text()) if out.exists() else total  # `gates list` runs no pytest: itself is all
    return Measured(total, usage.ru_maxrss / 1024, process.returncode, own)


def _median(runs: list[Measured]) -> Measured:
    return Measured(statistics.median(r.cpu_s for r in runs), statistics.median(r.peak_mib for r in runs), runs[-1].code,
                    statistics.median(r.own_cpu_s for r in runs))


def _list_start_up(rounds: int) -> Measured:
    """`gates list` of a project with one gate file of one case: the start-up every listing pays once."""
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as folder:
        write_project(Path(folder), 1, 1)
        return _median([measure([sys.executable, "-m", "_vllm_gates.frontends.cli", "list"], Path(folder)) for _ in range(max(rounds, 3))])


def one_file_capacity(cases: int = 100_000) -> tuple[Measured, float]:
    """`gates list` of one gate file of ``cases`` cases (the issue: one file may hold 100k): its CPU time, memory,
    exit status, and the file's size in MiB."""
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as folder:
        root = Path(folder)
        write_project(root, cases, 1)
        size = (root / "gates" / "rows" / "row0" / "gate.yaml").stat().st_size / 2**20
        return measure([sys.executable, "-m", "_vllm_gates.frontends.cli", "list"], root), size


def bench(cases: int, files: int, rounds: int) -> list[tuple[str, float, float, str]]:
    """(what, measured, target, unit) for one project size."""
    py = sys.executable
    pytest_base = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as folder:
        root = Path(folder)
        write_project(root, cases, files)
        commands = {  # each pair compared is measured one right after the other
            "gates list": [py, "-m", "_vllm_gates.frontends.cli", "list"],
            "collect plain": pytest_base + ["--collect-only", "plain"],
            "collect gates": pytest_base + ["--collect-only", "gates"],
            "run plain": pytest_base + ["plain"],
            "run gates": pytest_base + ["gates"],
            "gates run": [py, "-m", "_vllm_gates.frontends.cli", "run"],
        }
        found: dict[str, list[Measured]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, command in commands.items():  # interleaved: each round measures every command once
                found[name].append(measure(command, root))
        m = {name: _median(runs) for name, runs in found.items()}

    def ratio(a: str, b: str, of: str = "cpu_s") -> float:
        """The median over rounds of a / b, each round's pair measured one after the other (the machine's drift
        between rounds cancels; a ratio of medians would mix runs far apart in time)."""
        return statistics.median(getattr(x, of) / getattr(y, of) for x, y in zip(found[a], found[b]))

    m["gates list, 1 case"] = _list_start_up(rounds)
    for name in ("run gates", "gates run", "run plain"):
        if m[name].code != 0:
            print(f"warning: {name} exited {m[name].code} at {cases} cases in {files} file(s)")
    per_case = (m["gates list"].cpu_s - m["gates list, 1 case"].cpu_s) / (cases - 1)
    workers = m["run gates"].cpu_s - m["run gates"].own_cpu_s  # the fork server and the workers it forked
    return [
        ("gates list, ms per case (past the start-up of a 1-case project)", 1000 * per_case, 0.1, ""),
        (f"  (gates list, ms per case with the start-up: {1000 * m['gates list'].cpu_s / cases:.3f})", 0.0, 0.0, "info"),
        ("collection, gates / plain (worker processes included)", ratio("collect gates", "collect plain"), 1.5, "x"),
        ("run, gates / plain (the judge; its worker processes apart, below)", ratio("run gates", "run plain", "own_cpu_s"), 1.15, "x"),
        (f"  (run with the worker processes: {ratio('run gates', 'run plain'):.3f}x; the worker processes "
         f"(subject isolation: a fork server and an impl and a known-bad worker per gate file): {workers:.2f} s CPU, "
         f"{1000 * workers / files:.1f} ms per gate file)", 0.0, 0.0, "info"),
        ("gates run / its pytest run (both with their worker processes)", ratio("gates run", "run gates"), 1.1, "x"),
        ("peak memory, gates / plain", ratio("run gates", "run plain", "peak_mib"), 2.0, "x"),
    ] + [(f"  ({name}: {r.cpu_s:.2f} s CPU, {r.own_cpu_s:.2f} s of it the process itself, {r.peak_mib:.0f} MiB)", 0.0, 0.0, "info")
         for name, r in m.items()]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--files", default="1,100")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--capacity", type=int, default=100_000, help="cases in the one-file capacity check (0: skip it)")
    args = parser.parse_args()
    missed = []
    for cases in (int(x) for x in args.sizes.split(",")):
        for files in (int(x) for x in args.files.split(",")):
            if files > cases:
                continue
            print(f"== {cases} cases in {files} gate file(s)")
            for what, value, target, unit in bench(cases, files, args.rounds):
                if unit == "info":
                    print(what)
                    continue
                ok = value <= target
                print(f"{what}: {value:.3f}{unit}; target <= {target}{unit} {'met' if ok else 'MISSED'}")
                if not ok:
                    missed.append(f"{what} at {cases}/{files}")
    if args.capacity:
        found, size = one_file_capacity(args.capacity)
        ok = found.code == 0
        print(f"== one gate file of {args.capacity} cases ({size:.1f} MiB): gates list exit {found.code}, "
              f"{found.cpu_s:.2f} s CPU, {found.peak_mib:.0f} MiB; target: it loads {'met' if ok else 'MISSED'}")
        if not ok:
            missed.append(f"one file of {args.capacity} cases")
    print("PASS" if not missed else "MISSED: " + "; ".join(missed))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
