"""What numeric gates cost (issue 29 item 6, b and c), measured side by side in one run.

(b) 1,000 cases of a 4,096-element float32 elementwise op (x * 2 + 1 in torch in the impl, float64 numpy rounded
    once in an independent oracle), gated with `compare: {policy: allclose}` through `gates run` (out-of-process
    workers, a temporary project; the gate's audit stand-in, known-bad and tolerance audit run too) against the same
    1,000 cases as a plain in-process `pytest.mark.parametrize` calling `torch.testing.assert_close`. Wall time of
    each whole process, median over rounds of each round's ratio; target <= 1.3x. The project sets
    `worker-preload = ["torch"]`, as a project whose workers use torch does (README, this repository's own
    pyproject.toml): without it each of the three workers imports torch by itself, about 1.5 s each here.
(c) The judge's peak memory (VmHWM, its RSS high-water mark) while one case compares a 1 GiB float32 pair end to
    end: the impl's and the oracle's workers send 1 GiB each, the judge decodes and compares under allclose. The
    judge is this process's child running `gates run` on that case alone; target <= 2.5 GiB.

Prints each target met or MISSED; exits 1 on a miss. Usage:
    python ci/bench/bench_numeric_gates.py [--cases 1000] [--rounds 3] [--mib 1024] [--skip-memory]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEED_GOAL, MEMORY_GOAL_GIB = 1.3, 2.5
ELEMENTS = 4096

DATA = '''import numpy as np


def data(seed, n):
    """The case's input tensor: seeded float32 normal values (the same on both sides of the benchmark)."""
    return np.random.Generator(np.random.PCG64(seed)).standard_normal(n, dtype=np.float32)
'''
IMPL = '''import torch

from pkg.data import data


def affine(seed, n):
    return torch.from_numpy(data(seed, n)) * 2 + 1


def affine_off(seed, n):
    return torch.from_numpy(data(seed, n)) * 2 + 1.01
'''
ORACLE = '''import numpy as np

from pkg.data import data


def affine(seed, n):
    return (data(seed, n).astype(np.float64) * 2 + 1).astype(np.float32)
'''
BIG_IMPL = '''import numpy as np


def ramp(n):
    return np.linspace(-1, 1, n, dtype=np.float32)
'''
BIG_ORACLE = '''import numpy as np


def ramp(n):
    out = np.linspace(-1, 1, n, dtype=np.float32)
    out[::3] = np.nextafter(out[::3], np.float32(2))  # one float32 step off: compared, within tolerance
    return out
'''
GATE = """row: R-0
title: numeric
spec: spec/s.md
gates:
  - id: {gate}
    impl: pkg.impl:{impl}
    oracle: pkg.oracle:{impl}
    compare: {{policy: allclose}}
    milestone: M1
    covers: [S-1.1]
    markers: [cpu]
    timeout: 600
    cases:
{cases}{known_bad}"""
PLAIN = '''import numpy as np
import pytest
import torch

from pkg.data import data


def oracle(seed, n):
    return (data(seed, n).astype(np.float64) * 2 + 1).astype(np.float32)


@pytest.mark.parametrize("seed", range({cases}))
def test_affine(seed):
    actual = torch.from_numpy(data(seed, {n})) * 2 + 1
    torch.testing.assert_close(actual, torch.from_numpy(oracle(seed, {n})))
'''
PYPROJECT = """[tool.vllm-gates]
roadmap = "spec/roadmap.yaml"
rows = ["gates/rows/*/gate.yaml"]
specs = ["spec/*.md"]
allowed-roots = ["pkg", "gates"]
worker-preload = ["torch"]

[tool.pytest.ini_options]
pythonpath = ["."]
"""


def _project(root: Path, gate: str, impl: str, oracle: str, cases: str, known_bad: str) -> Path:
    """A temporary project: one row, one gate file, the given impl and oracle modules."""
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "data.py").write_text(DATA)
    (root / "pkg" / "impl.py").write_text(impl)
    (root / "pkg" / "oracle.py").write_text(oracle)
    (root / "spec").mkdir()
    (root / "spec" / "s.md").write_text("# S\n\n- **S-1.1** the op is computed\n")
    (root / "spec" / "roadmap.yaml").write_text("rows:\n  R-0:\n    title: numeric\n    state: DONE\n    milestones:\n"
                                                "      M1: {title: op, state: DONE}\n")
    (root / "pyproject.toml").write_text(PYPROJECT)
    folder = root / "gates" / "rows" / "r0"
    folder.mkdir(parents=True)
    for package in (root / "gates", root / "gates" / "rows", folder):
        (package / "__init__.py").write_text("")
    (folder / "gate.yaml").write_text(GATE.format(gate=gate, impl="affine" if gate == "affine" else "ramp",
                                                  cases=cases, known_bad=known_bad))
    return root


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTHONPATH")}


def _timed(command: list[str], cwd: Path) -> tuple[float, float]:
    """Wall seconds of the command, and the CPU seconds of its process tree (the processes it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def speed(cases: int, rounds: int) -> bool:
    """(b): `gates run` of the gate vs the plain pytest suite, each a whole process, one right after the other."""
    gates = str(Path(sys.executable).parent / "gates")
    with tempfile.TemporaryDirectory() as tmp:
        listed = "".join(f"      c{seed}: {{input: {{seed: {seed}, n: {ELEMENTS}}}}}\n" for seed in range(cases))
        root = _project(Path(tmp) / "gated", "affine", IMPL, ORACLE, listed,
                        "    known_bad:\n      plus-a-hundredth: pkg.impl:affine_off\n")
        plain = Path(tmp) / "plain"
        plain.mkdir()
        (plain / "pkg").mkdir()
        (plain / "pkg" / "__init__.py").write_text("")
        (plain / "pkg" / "data.py").write_text(DATA)
        (plain / "test_plain.py").write_text(PLAIN.format(cases=cases, n=ELEMENTS))
        (plain / "pyproject.toml").write_text('[project]\nname = "plain"\nversion = "0"\n')
        pairs = []
        for _ in range(rounds):
            plain_s = _timed([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_plain.py"], plain)
            gated_s = _timed([gates, "run", "--marker", "cpu"], root)
            pairs.append((gated_s, plain_s))
    ratio = statistics.median(g[0] / p[0] for g, p in pairs)
    cpu_ratio = statistics.median(g[1] / p[1] for g, p in pairs)
    met = ratio <= SPEED_GOAL
    print(f"(b) {cases} cases of a {ELEMENTS}-element float32 x*2+1 under allclose, median of {rounds} round(s):")
    print(f"  plain pytest parametrize + torch.testing.assert_close: {statistics.median(p[0] for _, p in pairs):7.2f} s wall, "
          f"{statistics.median(p[1] for _, p in pairs):7.2f} s CPU")
    print(f"  gates run (judge + impl, oracle and known-bad workers; audit, known-bad and tolerance audit items): "
          f"{statistics.median(g[0] for g, _ in pairs):7.2f} s wall, {statistics.median(g[1] for g, _ in pairs):7.2f} s CPU")
    print(f"  ratio {ratio:.2f}x wall (target <= {SPEED_GOAL:g}x): {'met' if met else 'MISSED'}; {cpu_ratio:.2f}x CPU")
    return met


JUDGE = """import sys
from _vllm_gates.frontends import cli
code = cli.main(sys.argv[1:])
with open('/proc/self/status') as status:
    peak = next(line for line in status if line.startswith('VmHWM:'))
print('JUDGE', code, int(peak.split()[1]) * 1024)
"""


def memory(mib: int) -> bool:
    """(c): the judge process's VmHWM while `gates run` judges one case of a ``mib`` MiB float32 pair."""
    elements = mib * 1024 * 1024 // 4
    with tempfile.TemporaryDirectory() as tmp:
        root = _project(Path(tmp) / "big", "big", BIG_IMPL, BIG_ORACLE, f"      big: {{input: {{n: {elements}}}}}\n", "")
        done = subprocess.run([sys.executable, "-c", JUDGE, "--root", str(root), "run", "R-0", "--gate", "big",
                               "--case", "big"], cwd=root, env=_env(), capture_output=True, text=True)
    line = next((line for line in done.stdout.splitlines() if line.startswith("JUDGE ")), None)
    if line is None or line.split()[1] != "0":
        raise SystemExit(f"the judge did not pass the case:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    peak = int(line.split()[2]) / 1024 ** 3
    met = peak <= MEMORY_GOAL_GIB
    print(f"(c) one case comparing a {mib} MiB float32 pair (workers send, the judge decodes and compares under allclose):")
    print(f"  judge peak RSS (VmHWM) {peak:.2f} GiB = {peak * 1024 / mib:.2f}x the tensor "
          f"(target <= {MEMORY_GOAL_GIB:g} GiB): {'met' if met else 'MISSED'}")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mib", type=int, default=1024, help="the size of each tensor of the memory benchmark")
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    results = [speed(args.cases, args.rounds)]
    if not args.skip_memory:
        results.append(memory(args.mib))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
