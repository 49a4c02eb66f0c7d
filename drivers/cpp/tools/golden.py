"""Golden replies of the Python port for each gate's cases (and drawn examples), and a checker for another driver.

`python drivers/cpp/tools/golden.py dump [ROW…] [--examples N] > golden.jsonl` runs the Python binding of every
gate in process and writes one JSON line per input: gate, case, the wire-encoded input and the Python reply.
`python drivers/cpp/tools/golden.py check DRIVER golden.jsonl` feeds each input to `DRIVER --lines` (one request per
stdin line: {"operation", "input"}; one reply per stdout line) and reports where the two disagree. A development
aid for driver authors: verdicts come only from `gates run --impl NAME`.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from _vllm_gates.definitions.config import load_config
from _vllm_gates.definitions.project import load_project
from _vllm_gates.values.compare import strict_equal
from _vllm_gates.wire.plain import decode, encode
from _vllm_gates.workers.worker_main import Failed, Worker

# How the Python port's exception classes map to the language-neutral error kinds (most derived class first).
ERROR_KINDS = {
    "CliUsageError": "usage", "AbiHistoryError": "abi-history", "AbiVersionMismatch": "abi-version",
    "ModelLoadFailed": "model-load", "InvalidArgument": "invalid-argument", "ValueError": "invalid-argument",
    "TypeError": "invalid-argument", "OverflowError": "invalid-argument", "RuntimeError": "runtime-error",
}


def kind_of(mro: list[str]) -> str | None:
    return next((ERROR_KINDS[name] for name in mro if name in ERROR_KINDS), None)


def _operation_of(gate: Any) -> str:
    return getattr(gate, "operation", None) or gate.id


def dump(rows: list[str], examples: int) -> int:
    config = load_config(Path.cwd())
    sys.path[:0] = [str(config.root)] + [str(config.root / p) for p in config.pythonpath]
    project = load_project(config)
    worker = Worker(config.allowed_roots)
    for gate_file in project.gate_files:
        if rows and gate_file.row not in rows:
            continue
        for gate in gate_file.gates:
            inputs = [(case.name, case.input) for case in gate.cases]
            if examples and gate.properties is not None:
                inputs += [(f"example-{i}", data) for i, data in enumerate(_draw(worker, gate, examples))]
            for name, data in inputs:
                request = {"target": gate.impl.dotted, "anchor": gate.impl.anchor, "input": encode(data, "input"),
                           "build": gate.build_impl.dotted if gate.build_impl else None,
                           "build_anchor": gate.build_impl.anchor if gate.build_impl else None}
                try:
                    reply: dict[str, Any] = {"result": worker.call(request)}
                except Failed as failure:
                    reply = {"error": {"kind": failure.kind, "message": failure.message}}
                print(json.dumps({"row": gate_file.row, "gate": gate.id, "case": name, "operation": _operation_of(gate),
                                  "input": request["input"], "reply": reply}))
    return 0


def _draw(worker: Worker, gate: Any, count: int) -> list[Any]:
    from hypothesis import HealthCheck, given, settings

    strategy = worker.target(gate.properties.strategy.dotted, gate.properties.strategy.anchor)()
    drawn: list[Any] = []

    def keep(data: Any) -> None:
        drawn.append(data)

    settings(max_examples=count, database=None, suppress_health_check=list(HealthCheck), deadline=None)(given(strategy)(keep))()
    return drawn


def check(driver: str, golden: Path, verbose: bool) -> int:
    lines = [json.loads(line) for line in golden.read_text().split("\n") if line.strip()]
    requests = "".join(json.dumps({"operation": g["operation"], "input": g["input"]}) + "\n" for g in lines)
    done = subprocess.run([driver, "--lines"], input=requests, capture_output=True, text=True)
    replies = done.stdout.split("\n")[:-1] if done.stdout.endswith("\n") else done.stdout.split("\n")  # not splitlines(): U+2028 is text
    if len(replies) != len(lines):
        print(f"driver gave {len(replies)} replies to {len(lines)} requests (exit {done.returncode}); stderr: {done.stderr[-2000:]}")
        return 2
    bad = 0
    for want, got_text in zip(lines, replies):
        problem = _disagreement(want["reply"], json.loads(got_text))
        if problem:
            bad += 1
            print(f"{want['row']} {want['gate']} [{want['case']}] {problem}\n    input: {json.dumps(want['input'])[:400]}")
        elif verbose:
            print(f"ok {want['gate']} [{want['case']}]")
    print(f"{len(lines) - bad} of {len(lines)} agree")
    return 1 if bad else 0


def _disagreement(want: dict[str, Any], got: dict[str, Any]) -> str | None:
    if "error" in want:
        return None if "error" in got else f"python could not answer ({want['error']}), driver did: {got}"
    if "error" in got:
        return f"driver error {got['error']}"
    want_r, got_r = want["result"], got["result"]
    if "raised" in want_r:
        if "raised" not in got_r:
            return f"python raised {want_r['raised']}, driver returned {str(got_r)[:300]}"
        kind = kind_of(want_r["raised"]["mro"])
        if kind not in got_r["raised"].get("mro", []):
            return f"kind: python {want_r['raised']['type']} ({kind}), driver {got_r['raised']}"
        missing = [f for f in _facts(want_r["raised"]["message"]) if f not in got_r["raised"]["message"]]
        return f"message lacks {missing}: python {want_r['raised']['message']!r}, driver {got_r['raised']['message']!r}" if missing else None
    if "raised" in got_r:
        return f"python returned {str(want_r)[:300]}, driver raised {got_r['raised']}"
    if not strict_equal(decode(got_r["value"]), decode(want_r["value"])):
        return f"values differ: python {json.dumps(want_r['value'])[:300]} driver {json.dumps(got_r['value'])[:300]}"
    return None


def _facts(message: str) -> list[str]:
    """The numbers and flag/field names a message carries (what another language's wording must also carry)."""
    return re.findall(r"--[a-z0-9-]+|\b[a-z]+(?:_[a-z0-9]+)+\b|(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])", message)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("rows", nargs="*")
    d.add_argument("--examples", type=int, default=0)
    c = sub.add_parser("check")
    c.add_argument("driver")
    c.add_argument("golden", type=Path)
    c.add_argument("-v", action="store_true")
    args = parser.parse_args()
    return dump(args.rows, args.examples) if args.command == "dump" else check(args.driver, args.golden, args.v)


if __name__ == "__main__":
    sys.exit(main())
