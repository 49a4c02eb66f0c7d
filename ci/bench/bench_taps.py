"""What taps cost `gates diverge` (docs/divergence.md; README, ci/bench), measured side by side in one run on a
checkpoint generated for the run (gates/rows/model_taps/make_checkpoint.py): by default 8 layers, hidden 256, a
32768-token vocabulary (Qwen3-0.6B's proportions, scaled down) and a 256-token prompt, so that the forward is a
large share of each call (its time alone, in this process, is printed beside).

- Speed: three forwards of the Python port over the same prompt, each asked of the implementation's worker as
  `gates diverge` asks it (diverge.impl_subject, Subject.outcome: the judge encodes the case's input, weights
  included, the worker runs the port on its gloo world, the answer comes back to the judge and is decoded; a tapped
  answer is then written to a tap file, as the command holds it):
  untapped (qwen3_taps:decoder_logits: the same checked inputs, ranks and layer code, nothing recorded, the logits
  alone), tapped free-running (the gate's decoder-taps on the case's input) and teacher-forced (the same with every
  feed point fed with the reference's taps). Each round runs the three in a rotated order; each time is the median
  over rounds. Targets: tapped <= 1.5x untapped, teacher-forced <= 2.5x. Beside them, the judge's localization of
  the three answers (divergence.localize), which no forward waits for.
- Memory: a child process runs `gates diverge`'s own path (diverge.run_opened) on the same case, the reference and
  the implementation answering in workers as always; its peak over what it held before (the case's weights loaded):
  the bytes traced by tracemalloc (numpy's arrays and the received buffers) and VmHWM, reset through
  /proc/self/clear_refs, less VmRSS before. Target: under 2x the largest tap pair (the largest tap's reference and
  implementation bytes together). The traced peak is judged; VmHWM is shown beside it (it also counts the allocator's
  slack and pages touched by imports made during the run).

Prints each target met or MISSED; exits 1 on a miss. Usage:
    python ci/bench/bench_taps.py [--layers 8] [--hidden 256] [--vocab 32768] [--tokens 256] [--rounds 5]
"""
from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from contextlib import redirect_stdout
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402  (after the path set-up)

from _vllm_gates.definitions.config import load_config  # noqa: E402
from _vllm_gates.run.checks import Subject  # noqa: E402
from _vllm_gates.taps.diverge import Opened, Options, _pool, _reference, _taps, feed_of, impl_subject, open_gate, \
    run_opened  # noqa: E402
from _vllm_gates.base.errors import Location  # noqa: E402
from _vllm_gates.definitions.model import TargetRef  # noqa: E402
from _vllm_gates.definitions.project import Project  # noqa: E402
from _vllm_gates.taps.divergence import localize  # noqa: E402
from _vllm_gates.taps.tap_dumps import spill  # noqa: E402
from gates.rows.model_taps.make_checkpoint import Geometry, load_checkpoint, write_checkpoint  # noqa: E402

TAPPED_GOAL, FORCED_GOAL, MEMORY_GOAL = 1.5, 2.5, 2.0
ROW, GATE = "MODEL-TAPS", "decoder-taps"
UNTAPPED = "impl.model_executor.models.qwen3_taps:decoder_logits"
SEED = 39


def _geometry(args: argparse.Namespace) -> Geometry:
    """The benchmark's decoder: Qwen3-0.6B's proportions scaled down (tied embedding, 4 query heads a KV head)."""
    return Geometry(layers=args.layers, hidden=args.hidden, num_heads=args.hidden // 32, num_kv_heads=args.hidden // 128,
                    head_dim=32, ffn=3 * args.hidden, vocab=args.vocab, tie_word_embeddings=True,
                    max_position=max(128, args.tokens))


def _opened(project: Project, checkpoint: Path, tokens: int) -> Opened:
    """The decoder-taps gate opened as `gates diverge` opens it, its case replaced by one over the checkpoint: a
    seeded prompt of ``tokens`` ids, tp 1, float32."""
    opened = open_gate(project, Options(ROW, GATE))
    config, mapped = load_checkpoint(checkpoint)
    weights = {name: np.array(array) for name, array in mapped.items()}  # in memory, as a gate file's case holds them
    ids = np.random.default_rng(SEED).integers(0, config["vocab"], tokens, dtype=np.int64)
    case = replace(opened.case, name="bench", input={"config": config, "weights": weights, "ids": ids, "tp": 1,
                                                     "dtype": "float32"})
    return replace(opened, case=case)


@dataclass(frozen=True)
class Round:
    """One round's seconds: each forward as the judge waits for it."""

    untapped: float
    tapped: float
    forced: float


def _timed(subject: Subject, data: dict[str, Any], what: str, folder: Path | None) -> tuple[float, Mapping[str, Any]]:
    """Seconds until the answer is decoded and, with ``folder``, held on disk as `gates diverge` holds a side's taps."""
    started = time.perf_counter()
    answer = _taps(subject.outcome(data), what)
    if folder is not None:
        answer = spill(answer, folder / f"{what}.safetensors")
    return time.perf_counter() - started, answer


def _forward_alone(case: dict[str, Any], rounds: int) -> float:
    """The median seconds of the untapped forward's rank function called in this process at tp 1: what the three
    forwards above pay for before any encoding, transport or pickling."""
    import torch

    from impl.model_executor.models import qwen3_taps
    from impl.model_executor.models.qwen3_weights import ModelConfig

    run = qwen3_taps.TapsRun(ModelConfig.from_mapping(case["config"]),
                             {name: torch.from_numpy(array) for name, array in case["weights"].items()},
                             torch.from_numpy(case["ids"]), torch.float32, {})
    seconds = []
    for _ in range(rounds):
        started = time.perf_counter()
        qwen3_taps.rank_logits(0, 1, run)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def speed(project: Project, opened: Opened, rounds: int, folder: Path) -> tuple[bool, int, Any]:
    """The three forwards side by side, rounds in rotated order, the tapped ones' taps held on disk in ``folder`` as
    `gates diverge` holds them; (targets met, largest tap pair bytes, the localization of the last round's answers)."""
    pool = _pool(project, opened.implementation)
    try:
        reference, _ = _reference(pool, project, opened, Options(ROW, GATE))
        impl = impl_subject(pool, project, opened)
        untapped = replace(impl, target=TargetRef(UNTAPPED, Location(__file__, 1, 1)), role="untapped")
        case = opened.case.input
        forced_input = {**case, opened.gate.taps.feed: feed_of(reference, opened)}
        runs = {"untapped": (untapped, case, None), "tapped": (impl, case, folder), "forced": (impl, forced_input, folder)}
        for name, (subject, data, spilled) in runs.items():  # warm: the worker's imports, its gloo world
            _timed(subject, data, name, spilled)
        measured, answers = [], {}
        for number in range(rounds):
            order = list(runs)[number % 3:] + list(runs)[:number % 3]
            seconds = {}
            for name in order:
                seconds[name], answers[name] = _timed(runs[name][0], runs[name][1], name, runs[name][2])
            measured.append(Round(**seconds))
    finally:
        pool.close()
    alone = _forward_alone(case, rounds)
    started = time.perf_counter()
    divergence = localize(reference, answers["tapped"], answers["forced"], opened.gate.taps, opened.gate.policy)
    judged_s = time.perf_counter() - started
    median, least = (Round(*(pick(getattr(r, field) for r in measured) for field in ("untapped", "tapped", "forced")))
                     for pick in (statistics.median, min))
    tapped, forced = median.tapped / median.untapped, median.forced / median.untapped
    total = sum(array.nbytes for array in answers["tapped"].values())
    print(f"speed, median of {rounds} rounds (each forward as the judge waits for it: encode, worker, port, decode, "
          f"the taps held on disk; the fastest round's beside it):")
    print(f"  untapped forward (logits only)       {1e3 * median.untapped:8.1f} ms ({1e3 * least.untapped:.1f})")
    print(f"  tapped, free-running ({len(answers['tapped'])} taps, {total / 2**20:.1f} MiB) "
          f"{1e3 * median.tapped:8.1f} ms ({1e3 * least.tapped:.1f})  {tapped:.2f}x ({least.tapped / least.untapped:.2f}x; "
          f"target <= {TAPPED_GOAL:g}x): {'met' if tapped <= TAPPED_GOAL else 'MISSED'}")
    print(f"  teacher-forced                       {1e3 * median.forced:8.1f} ms ({1e3 * least.forced:.1f})  "
          f"{forced:.2f}x ({least.forced / least.untapped:.2f}x; target <= {FORCED_GOAL:g}x): "
          f"{'met' if forced <= FORCED_GOAL else 'MISSED'}")
    print(f"  beside them: the untapped forward alone, in this process (no transport, no world) {1e3 * alone:.1f} ms")
    print(f"  the judge's localization of the three (no forward waits for it): {1e3 * judged_s:.1f} ms; "
          f"{divergence.classification.describe()}")
    pair = max(reference[name].nbytes + answers["tapped"][name].nbytes for name in reference)
    return tapped <= TAPPED_GOAL and forced <= FORCED_GOAL, pair, divergence


def _status(field: str) -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def judge_memory(checkpoint: Path, tokens: int) -> list[dict[str, int]]:
    """In this (child) process: `gates diverge`'s path on the case, twice (the first run also pays the imports it
    makes and the allocator's growth); each run's exit code and peaks over what the process held before it."""
    project = Project(load_config(REPO))
    opened = _opened(project, checkpoint, tokens)
    runs = []
    for _ in range(2):
        rss_before = _status("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        tracemalloc.start()
        with redirect_stdout(io.StringIO()):
            code = run_opened(project, opened, Options(ROW, GATE))
        traced = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        runs.append({"code": int(code), "traced": traced, "hwm": _status("VmHWM") - rss_before})
    return runs


def memory(checkpoint: Path, tokens: int, pair: int) -> bool:
    """The child's peaks against MEMORY_GOAL x the largest tap pair."""
    done = subprocess.run([sys.executable, __file__, "--judge-memory", str(checkpoint), "--tokens", str(tokens)],
                          cwd=REPO, capture_output=True, text=True)
    line = next((line for line in done.stdout.splitlines() if line.startswith("JUDGE ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"the judge's run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    runs = json.loads(line.removeprefix("JUDGE "))
    if any(run["code"] not in (0, 1) for run in runs):
        raise SystemExit(f"gates diverge's path exited {[run['code'] for run in runs]}:\n{done.stderr[-3000:]}")
    bound = MEMORY_GOAL * pair
    met = all(run["traced"] < bound for run in runs)
    print(f"memory, the judge running `gates diverge`'s path (exit {runs[0]['code']}), over what it held before; the "
          f"largest tap pair {pair / 2**20:.2f} MiB:")
    for label, run in zip(("first run", "second run"), runs):
        print(f"  {label:<10}: traced peak {run['traced'] / 2**20:6.2f} MiB = {run['traced'] / pair:.2f}x the pair "
              f"(target < {MEMORY_GOAL:g}x): {'met' if run['traced'] < bound else 'MISSED'}; VmHWM - VmRSS before "
              f"{run['hwm'] / 2**20:6.2f} MiB = {run['hwm'] / pair:.2f}x")
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=256, help="a multiple of 128 (32-wide heads, 4 to a KV head)")
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--tokens", type=int, default=256, help="the prompt's length")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--judge-memory", type=Path, help=argparse.SUPPRESS)  # the child: a checkpoint directory
    args = parser.parse_args(argv)
    if args.judge_memory:
        print("JUDGE " + json.dumps(judge_memory(args.judge_memory, args.tokens)))
        return 0
    if args.hidden % 128 or args.hidden < 128 or min(args.layers, args.vocab, args.tokens, args.rounds) < 1:
        parser.error(f"--hidden must be a multiple of 128, the others >= 1; got --hidden {args.hidden} --layers "
                     f"{args.layers} --vocab {args.vocab} --tokens {args.tokens} --rounds {args.rounds}")
    geometry = _geometry(args)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = write_checkpoint(geometry, SEED, Path(tmp) / "checkpoint")
        print(f"model: {geometry.layers} layers, hidden {geometry.hidden}, {geometry.num_heads} heads "
              f"({geometry.num_kv_heads} KV), ffn {geometry.ffn}, vocab {geometry.vocab} (tied), "
              f"{(checkpoint / 'model.safetensors').stat().st_size / 2**20:.0f} MiB float32; a prompt of "
              f"{args.tokens} tokens; tp 1, float32; {os.cpu_count()} CPUs")
        project = Project(load_config(REPO))
        met, pair, _ = speed(project, _opened(project, checkpoint, args.tokens), args.rounds, Path(tmp))
        results = [met]
        if not args.skip_memory:
            results.append(memory(checkpoint, args.tokens, pair))
    print(f"load average (1, 5, 15 min) {' '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} after")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
