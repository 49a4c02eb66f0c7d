"""`gates upstream-drift --to VERSION` (docs/upstream.md, "Drift"): what changed in upstream between the pin and another release.

Every upstream gate's oracle (an ``upstream.*`` adapter over vLLM's own functions) is asked the same inputs, its
named cases and examples drawn from its strategy with a fixed seed, once under the pinned release and once under
the other one, each in its own process (``_vllm_gates.frontends.drift_probe``); the outcomes are compared per row and
operation. The other release lies in a folder of its own (``bash ci/install-upstream-beside.sh VERSION``), put
first on that process's path; its dependencies are the pin's. Where an adapter cannot run under the other release
(an import or a name it lacks), that is reported as *unavailable*, apart from the changes.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _vllm_gates.base.errors import GatesError
from _vllm_gates.definitions.config import Config
from _vllm_gates.definitions.import_failures import UNAVAILABLE_ERRORS  # an adapter importing what the other release lacks
from _vllm_gates.definitions.model import Gate, GateFile
from _vllm_gates.definitions.targets import resolve
from _vllm_gates.values.render import render_value
from _vllm_gates.wire.plain import NotPlain, decode, encode

SHOWN_PER_GATE = 3
SHOWN_CHARS = 300  # a value or message longer than this is cut in the report, marked with …


class DriftError(GatesError):
    """The comparison could not be made (a probe crashed, timed out, or found another release than declared)."""


@dataclass(frozen=True)
class Side:
    """One release compared: its version, and the folder put first on its probe's path (None: this environment's)."""

    version: str
    site: Path | None

    @property
    def where(self) -> str:
        return str(self.site) if self.site else "this environment"


@dataclass(frozen=True)
class Probe:
    """One input of one upstream gate, in the wire form both probes receive."""

    row: str
    gate: Gate
    source: str        # "case NAME" or "example N"
    encoded: Any


@dataclass(frozen=True)
class Change:
    """One input whose outcome differs between the two releases."""

    source: str
    input: str
    before: str
    after: str
    kind: str          # value | error | now-raises | no-longer-raises | message


@dataclass(frozen=True)
class GateDrift:
    """What one upstream gate's inputs gave under both releases."""

    row: str
    gate: str
    operation: str
    inputs: int
    same: int
    changes: tuple[Change, ...]
    changed: int
    unavailable: int
    unavailable_reason: str
    kinds: tuple[tuple[str, int], ...] = field(default=())

    @property
    def drifted(self) -> bool:
        return self.changed > 0 or self.unavailable > 0


@dataclass(frozen=True)
class DriftReport:
    """The comparison of every selected upstream gate between the pin and another release."""

    pin: Side
    other: Side
    gates: tuple[GateDrift, ...]

    @property
    def drifted(self) -> bool:
        return any(g.drifted for g in self.gates)


def upstream_gates(gate_files: Iterable[GateFile], marker: str, rows: Sequence[str]) -> list[tuple[str, Gate]]:
    """The gates carrying the upstream marker (with an oracle) in the selected rows (all rows when none is named)."""
    return [(gf.row, gate) for gf in gate_files if not rows or gf.row in rows
            for gate in gf.gates if marker in gate.markers and gate.oracle is not None]


def _examples(config: Config, gate: Gate, count: int) -> list[Any]:
    """``count`` inputs drawn from the gate's strategy, the same ones on every run (a fixed seed, no shrinking)."""
    if gate.properties is None or count <= 0:
        return []
    import hypothesis
    from hypothesis import HealthCheck, Phase

    strategy = resolve(gate.properties.strategy, f"gate {gate.id}.properties.strategy", config.allowed_roots)()
    drawn: list[Any] = []

    @hypothesis.settings(max_examples=count, derandomize=True, database=None, deadline=None,
                         phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @hypothesis.given(strategy)
    def draw(data: Any) -> None:
        drawn.append(data)

    draw()
    return drawn


def probes(config: Config, selected: list[tuple[str, Gate]], examples: int) -> list[Probe]:
    """Each selected gate's named case inputs, then its drawn examples (inputs that are not plain data, and inputs
    holding tensors, are left out)."""
    found: list[Probe] = []
    for row, gate in selected:
        inputs = [(f"case {case.name}", case.input) for case in gate.cases]
        inputs += [(f"example {n}", data) for n, data in enumerate(_examples(config, gate, examples), 1)]
        seen: set[str] = set()
        for source, data in inputs:
            try:
                encoded = encode(data, "input")
                key = json.dumps(encoded, sort_keys=True)
            except (NotPlain, TypeError):  # TypeError: a tensor, whose elements the probes' JSON request cannot carry
                continue
            if key not in seen:  # a drawn example that repeats an input is compared once
                seen.add(key)
                found.append(Probe(row, gate, source, encoded))
    return found


def _request(config: Config, found: list[Probe]) -> dict[str, Any]:
    assert config.upstream is not None
    calls = [{"target": p.gate.oracle.dotted, "anchor": p.gate.oracle.anchor,  # type: ignore[union-attr]
              "build": p.gate.build_oracle.dotted if p.gate.build_oracle else None,
              "build_anchor": p.gate.build_oracle.anchor if p.gate.build_oracle else None, "input": p.encoded}
             for p in found]
    return {"root": str(config.root), "allowed_roots": list(config.allowed_roots), "package": config.upstream.package,
            "calls": calls}


def run_probe(config: Config, side: Side, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One probe process under ``side``; its reply, checked to come from the declared release."""
    assert config.upstream is not None
    env = dict(os.environ)
    path = [str(side.site)] if side.site else []
    path += [str(config.root / p) for p in config.pythonpath] + [str(config.root)]
    if env.get("PYTHONPATH"):
        path.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(path)
    try:
        done = subprocess.run([sys.executable, "-m", "_vllm_gates.frontends.drift_probe"], input=json.dumps(request),
                              capture_output=True, text=True, timeout=timeout, cwd=config.root, env=env)
    except subprocess.TimeoutExpired:
        raise DriftError(f"the probe of {config.upstream.package} {side.version} ({side.where}) ran past {timeout:g} s") from None
    if done.returncode != 0:
        raise DriftError(f"the probe of {config.upstream.package} {side.version} ({side.where}) exited {done.returncode}: "
                         f"{done.stderr.strip()[-1500:]}")
    try:
        reply = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise DriftError(f"the probe of {side.version} did not answer in JSON ({exc}): {done.stdout[:300]!r}") from None
    facts = reply["package"]
    if facts["version"] != side.version:
        found = facts["version"] or "no installed release"
        raise DriftError(f"{config.upstream.package} {side.version} was to be compared ({side.where}), but that path holds {found}")
    if side.site and facts["location"] and not Path(facts["location"]).resolve().is_relative_to(side.site.resolve()):
        raise DriftError(f"{config.upstream.package} was imported from {facts['location']}, not from {side.site}")
    if facts["import_error"]:
        raise DriftError(f"{config.upstream.package} {side.version} ({side.where}) does not import: {facts['import_error']}")
    if len(reply["outcomes"]) != len(request["calls"]):
        raise DriftError(f"the probe of {side.version} answered {len(reply['outcomes'])} of {len(request['calls'])} calls")
    return reply


def _unavailable(outcome: dict[str, Any]) -> str | None:
    """Why an adapter could not run at all on this release, or None."""
    if "failed" in outcome:
        return outcome["failed"]["message"]
    raised = outcome.get("raised")
    if raised and (raised.get("type") in UNAVAILABLE_ERRORS or _missing_module_name(raised)):
        return f"{raised['type']}: {raised['message']}"
    return None


def _cannot_run(pin: list[dict[str, Any]], other: list[dict[str, Any]], indices: list[int]) -> str:
    """Why the other release cannot run a gate's adapter here at all: every input raised one and the same error
    there (two inputs at least) while the pin answered some with a value (a platform it cannot detect, say); else ''."""
    raised = {(o["raised"]["type"], o["raised"]["message"]) if "raised" in o else None for o in (other[i] for i in indices)}
    if len(indices) < 2 or len(raised) != 1 or None in raised or not any("value" in pin[i] for i in indices):
        return ""
    kind, message = next(iter(raised))  # type: ignore[misc]
    return f"every input raises {kind}: {message}"


def _missing_module_name(raised: dict[str, Any]) -> bool:
    """An adapter reading a module attribute the release does not have ("module 'm' has no attribute 'x'")."""
    return raised.get("type") == "AttributeError" and str(raised.get("message", "")).startswith("module '")


def _clip(text: str, limit: int = SHOWN_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown(outcome: dict[str, Any]) -> str:
    if "value" in outcome:
        return render_value(decode(outcome["value"]))
    if "raised" in outcome:
        return f"raises {outcome['raised']['type']}: {outcome['raised']['message']}"
    return f"cannot run: {outcome['failed']['message']}"


def _kind(before: dict[str, Any], after: dict[str, Any]) -> str:
    if "value" in before and "value" in after:
        return "value"
    if "value" in before:
        return "now-raises"
    if "value" in after:
        return "no-longer-raises"
    if before["raised"]["type"] == after["raised"]["type"]:
        return "message"
    return "error"


def compare(found: list[Probe], pin: list[dict[str, Any]], other: list[dict[str, Any]]) -> tuple[GateDrift, ...]:
    """Per gate: how many inputs gave the same outcome, which changed (the first few shown) and which could not run."""
    by_gate: dict[tuple[str, str], list[int]] = {}
    for index, probe in enumerate(found):
        by_gate.setdefault((probe.row, probe.gate.id), []).append(index)
    result = []
    for (row, gate_id), indices in by_gate.items():
        gate = found[indices[0]].gate
        same = changed = unavailable = 0
        reason, blanket = "", _cannot_run(pin, other, indices)
        changes: list[Change] = []
        kinds: dict[str, int] = {}
        for index in indices:
            before, after = pin[index], other[index]
            if before == after:
                same += 1
                continue
            why = _unavailable(after) or blanket or None
            if why is not None and _unavailable(before) is None:
                unavailable += 1
                reason = reason or why.splitlines()[0][:300]
                continue
            changed += 1
            kind = "error" if "failed" in before or "failed" in after else _kind(before, after)
            kinds[kind] = kinds.get(kind, 0) + 1
            if len(changes) < SHOWN_PER_GATE:
                changes.append(Change(found[index].source, _clip(render_value(decode(found[index].encoded))),
                                      _clip(_shown(before)), _clip(_shown(after)), kind))
        result.append(GateDrift(row, gate_id, gate.operation or gate.id, len(indices), same, tuple(changes), changed,
                                unavailable, reason, tuple(sorted(kinds.items()))))
    return tuple(result)


def drift(config: Config, gate_files: Iterable[GateFile], pin: Side, other: Side, rows: Sequence[str] = (),
          examples: int = 25, timeout: float = 900.0) -> DriftReport:
    """Ask both releases every selected upstream gate's inputs and compare (DriftError when a side cannot answer)."""
    marker = config.parity_marker()
    if marker is None:
        raise DriftError("no marker of this project requires `upstream`: there are no upstream gates to compare")
    selected = upstream_gates(gate_files, marker, rows)
    if not selected:
        raise DriftError(f"no gate carries the marker {marker!r} in the selected rows")
    root = str(config.root)
    added = [p for p in [root, *(str(config.root / q) for q in config.pythonpath)] if p not in sys.path]
    sys.path[:0] = added  # the strategies are resolved here, under the project's roots
    try:
        found = probes(config, selected, examples)
    finally:
        for entry in added:
            sys.path.remove(entry)
    request = _request(config, found)
    before = run_probe(config, pin, request, timeout)["outcomes"]
    after = run_probe(config, other, request, timeout)["outcomes"]
    return DriftReport(pin, other, compare(found, before, after))


# ------------------------------------------------------------------------------------------------ rendering


def _counts(g: GateDrift) -> str:
    kinds = ", ".join(f"{n} {k}" for k, n in g.kinds)
    return f"{g.changed} changed" + (f" ({kinds})" if kinds else "")


def render_text(report: DriftReport, package: str) -> str:
    """The per-row, per-operation table, then the first changed inputs of each gate."""
    lines = [f"upstream drift: {package} {report.pin.version} (the pin, {report.pin.where}) -> "
             f"{report.other.version} ({report.other.where})", ""]
    width = max(len(f"{g.gate} ({g.operation})") for g in report.gates) + 4
    lines.append(f"{'row / gate (operation)':<{width}} {'inputs':>6} {'same':>6} {'changed':>8} {'unavailable':>12}")
    row = None
    for g in report.gates:
        if g.row != row:
            row = g.row
            lines.append(row)
        lines.append(f"  {g.gate + ' (' + g.operation + ')':<{width - 2}} {g.inputs:>6} {g.same:>6} {g.changed:>8} {g.unavailable:>12}")
    drifted = [g for g in report.gates if g.drifted]
    if not drifted:
        lines += ["", f"no drift: every input gave the same outcome under {report.pin.version} and {report.other.version}"]
    for g in drifted:
        lines += ["", f"{g.row} {g.gate} ({g.operation}): {_counts(g)}, {g.unavailable} unavailable"]
        if g.unavailable:
            lines.append(f"  unavailable under {report.other.version}: {g.unavailable_reason}")
        for c in g.changes:
            lines += [f"  {c.source} [{c.kind}]: {c.input}",
                      f"    {report.pin.version}: {c.before}", f"    {report.other.version}: {c.after}"]
    return "\n".join(lines) + "\n"


def render_markdown(report: DriftReport, package: str) -> str:
    """The same table as Markdown, for a CI summary or the README."""
    lines = [f"### Upstream drift: {package} {report.pin.version} (pin) → {report.other.version}", "",
             "| row | gate (operation) | inputs | same | changed | unavailable |", "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {g.row} | {g.gate} ({g.operation}) | {g.inputs} | {g.same} | {_counts(g)} | {g.unavailable} |"
              for g in report.gates]
    for g in (g for g in report.gates if g.drifted):
        lines += ["", f"**{g.gate}**" + (f": unavailable under {report.other.version}: `{g.unavailable_reason}`" if g.unavailable else "")]
        lines += [f"- {c.source} ({c.kind}): `{c.input}`: {report.pin.version} `{c.before}`; {report.other.version} `{c.after}`"
                  for c in g.changes]
    return "\n".join(lines) + "\n"


def as_json(report: DriftReport, package: str) -> dict[str, Any]:
    """The report as JSON-ready data (``drifted``: whether any input changed or could not run)."""
    return {
        "package": package,
        "from": {"version": report.pin.version, "site": str(report.pin.site) if report.pin.site else None},
        "to": {"version": report.other.version, "site": str(report.other.site) if report.other.site else None},
        "drifted": report.drifted,
        "gates": [{"row": g.row, "gate": g.gate, "operation": g.operation, "inputs": g.inputs, "same": g.same,
                   "changed": g.changed, "kinds": dict(g.kinds), "unavailable": g.unavailable,
                   "unavailable_reason": g.unavailable_reason,
                   "examples": [{"source": c.source, "input": c.input, "from": c.before, "to": c.after, "kind": c.kind}
                                for c in g.changes]}
                  for g in report.gates],
    }
