"""One side of `gates upstream-drift` (docs/upstream.md, "Drift"): answers the upstream gates' oracle calls under one release.

Run as ``python -m _vllm_gates.frontends.drift_probe`` with the release's folder first on ``PYTHONPATH`` (or none: the
environment's own install). It reads one JSON request on stdin, ``{root, allowed_roots, package, calls: [{target,
anchor, build, build_anchor, input}]}``, and writes one JSON reply on stdout: ``{package: {version, location,
import_error}, outcomes: [...]}``, each outcome what a worker's call returns (docs/worker-protocol.md) or
``{"failed": {kind, message}}`` when the target or its builder could not run. The judge never imports the package.
"""
from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
from importlib import metadata
from typing import Any

from _vllm_gates.wire.settings import set_current
from _vllm_gates.workers.worker_main import Failed, Worker


def package_facts(package: str) -> dict[str, Any]:
    """The version its distribution metadata gives on this path, where its module lies, and why it does not import."""
    try:
        version: str | None = metadata.version(package)
    except metadata.PackageNotFoundError:
        version = None
    facts: dict[str, Any] = {"version": version, "location": None, "import_error": None}
    try:
        module = importlib.import_module(package)
        facts["location"] = os.path.dirname(getattr(module, "__file__", "") or "") or None
    except Exception as exc:  # noqa: BLE001 - any failure to import is the fact to report
        facts["import_error"] = f"{type(exc).__name__}: {exc}"
    return facts


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """Every call of the request, in order, under this process's path."""
    os.chdir(request["root"])  # the root is on PYTHONPATH already (drift.run_probe)
    set_current({})
    worker = Worker(tuple(request["allowed_roots"]))
    outcomes = []
    for call in request["calls"]:
        try:
            outcomes.append(worker.call(call))
        except Failed as failure:
            outcomes.append({"failed": {"kind": failure.kind, "message": failure.message[:2000]}})
        except Exception as exc:  # noqa: BLE001 - the probe's own failure on one call is that call's outcome
            outcomes.append({"failed": {"kind": "probe", "message": f"{type(exc).__name__}: {exc}"[:2000]}})
    return {"package": package_facts(request["package"]), "outcomes": outcomes}


def main() -> int:
    request = json.loads(sys.stdin.read())
    with contextlib.redirect_stdout(sys.stderr):  # what the targets print must not mix with the reply
        reply = answer(request)
    sys.stdout.write(json.dumps(reply))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
