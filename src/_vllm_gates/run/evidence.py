"""Evidence: what earlier runs proved, read from their JSON reports and held against the tree as it is now.

A gate's entry in a report (schema vllm-gates/run/3, docs/evidence.md) is evidence when that run executed the
gate. It backs a verdict now only when its fingerprint equals the gate's fingerprint in this tree, it judged the
same implementation, and it did not run on a simulated device.
"""
from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from _vllm_gates.base.errors import GatesError
from _vllm_gates.definitions.requirements import SIMULATED_DEVICE_ENV
from _vllm_gates.results.records import RecordError
from _vllm_gates.results.report_files import RunReportFile
from _vllm_gates.results.reports import RUN_SCHEMA
from _vllm_gates.results.verdicts import RunReport, Scope, Verdict
from _vllm_gates.run.fingerprints import GateFingerprint, changed_inputs


class EvidenceError(GatesError):
    """An evidence file that cannot be read: not there, not JSON, not a run report of this schema."""


@dataclass(frozen=True)
class GateEvidence:
    """One gate as one earlier run judged it, and where that run ran."""

    source: str
    row: str
    gate: str
    verdict: Verdict
    reason: str
    fingerprint: str
    inputs: Mapping[str, str]
    device: str
    simulated: bool
    impl: str
    answered: frozenset[str] | None = None  # the row's operations that run's implementation answered (None: not recorded)


@dataclass(frozen=True)
class Assessed:
    """Evidence held against the tree now: usable, or why not (stale, simulated, another implementation)."""

    evidence: GateEvidence
    usable: bool
    why: str = ""

    @property
    def label(self) -> str:
        return f"{self.evidence.source} ({self.evidence.device})"


def load_evidence(path: Path, shown: str) -> list[GateEvidence]:
    """Every executed gate of a run report; EvidenceError naming the file and what is wrong with it."""
    return evidence_in(read_run_report(path, shown), shown)


def load_evidence_files(paths: list[str], absolute: bool = False) -> list[GateEvidence]:
    """The gates of every run report named (`--evidence`, `--gates-evidence`), each file read once; EvidenceError
    names the file as written. ``absolute``: each gate's source is the file's absolute path, as `gates run` hands it
    to the pytest run it starts from the project root."""
    found: list[GateEvidence] = []
    for shown in paths:
        source = str(Path(shown).resolve()) if absolute else shown
        found.extend(replace(gate, source=source) for gate in load_evidence(Path(shown), shown))
    return found


def read_run_report(path: Path, shown: str, flag: str = "--evidence") -> RunReportFile:
    """A run report, read once as the types that wrote it (report_files); EvidenceError naming the flag and file when
    it cannot be read, is not a run report, or a record in it is malformed (the field and its value)."""
    label = f"{flag} {shown}"
    document = read_report(path, label, RUN_SCHEMA, "run report", "the --json report of `gates run` or pytest --gates-json",
                           EvidenceError)
    try:
        return RunReportFile.from_data(document, label)
    except RecordError as malformed:
        raise EvidenceError(f"{label}: malformed run report: {str(malformed).removeprefix(label + ': ')}") from None


def read_report(path: Path, label: str, schema: str, kind: str, origin: str, error: type[GatesError]) -> dict[str, Any]:
    """A JSON report of ``schema``; ``error`` naming ``label`` (the flag and file) when it cannot be read or is not one."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise error(f"{label}: cannot read it: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise error(f"{label}: not a JSON {kind}: {exc}") from None
    found = document.get("schema") if isinstance(document, dict) else None
    if found != schema:
        raise error(f"{label}: schema {found!r}, expected {schema!r} ({origin})")
    return document


def evidence_in(report: RunReportFile, shown: str) -> list[GateEvidence]:
    """Every gate a run report executed whole; EvidenceError when its evidence record does not hold what they name."""
    record = report.evidence
    impl, inputs = record.get("impl"), record.get("inputs")
    if not isinstance(impl, str) or not isinstance(inputs, dict):
        raise EvidenceError(f"--evidence {shown}: malformed run report: evidence must name the impl and the inputs, "
                            f"got impl {impl!r}, inputs {type(inputs).__name__}")
    found = []
    for row in report.rows:
        count = row.operations
        answered = frozenset(count.implemented) if count is not None and count.impl == impl else None
        for gate in row.gates:
            if not gate.executed or gate.partial:
                continue  # judged there on other evidence, not run, or run in part (docs/evidence.md §1): nothing first-hand
            missing = [name for name in gate.inputs if name not in inputs]
            if missing or not gate.run_verdict:
                raise EvidenceError(f"--evidence {shown}: malformed run report: gate {gate.row}::{gate.gate} "
                                    + (f"names input {missing[0]!r}, which its evidence record lacks" if missing
                                       else "was executed but has no run_verdict"))
            found.append(GateEvidence(shown, gate.row, gate.gate, Verdict(gate.run_verdict), gate.run_reason,
                                      gate.fingerprint, {name: inputs[name] for name in gate.inputs}, gate.device,
                                      gate.simulated, impl, answered))
    return found


def assess(found: list[GateEvidence], now: Mapping[tuple[str, str], GateFingerprint], impl: str) -> dict[tuple[str, str], list[Assessed]]:
    """Each piece of evidence for a gate of this tree, usable or not and why; evidence for unknown gates is dropped."""
    assessed: dict[tuple[str, str], list[Assessed]] = {}
    for entry in found:
        current = now.get((entry.row, entry.gate))
        if current is None:
            continue
        if entry.impl != impl:
            verdict = Assessed(entry, False, f"{entry.source} judged implementation {entry.impl!r}, not {impl!r}")
        elif entry.fingerprint != current.fingerprint:
            verdict = Assessed(entry, False, f"STALE: {entry.source} has another fingerprint "
                                             f"({changed_inputs(entry.inputs, current.inputs)})")
        elif entry.simulated:
            verdict = Assessed(entry, False, f"{entry.source} ran on a simulated device ({entry.device}): it backs no claim")
        else:
            verdict = Assessed(entry, True)
        assessed.setdefault((entry.row, entry.gate), []).append(verdict)
    return assessed


@dataclass(frozen=True)
class Device:
    """Where a run executed its gates: the CPU, and the GPU when gpu gates could run (simulated or real)."""

    cpu: str
    gpu: str | None = None
    gpu_memory_bytes: int | None = None
    simulated: bool = False

    def describe(self, uses_gpu: bool) -> str:
        if uses_gpu and self.gpu:
            memory = f", {self.gpu_memory_bytes / 2**30:.0f} GiB" if self.gpu_memory_bytes else ""
            return f"gpu: {self.gpu}{memory}" + (" (simulated)" if self.simulated else "")
        return f"cpu: {self.cpu}"


def this_device() -> Device:
    """This machine: the CPU model, and the CUDA device when torch is already loaded and sees one (or a simulated one)."""
    cpu = _cpu_model()
    simulated = os.environ.get(SIMULATED_DEVICE_ENV, "").strip()
    if simulated:
        return Device(cpu, simulated, None, True)
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return Device(cpu, torch.cuda.get_device_name(0), int(torch.cuda.get_device_properties(0).total_memory))
    except Exception:  # a broken CUDA set-up: the run's gpu gates say why
        pass
    return Device(cpu)


RECORDED_PACKAGES = ("torch", "hypothesis", "pytest", "numpy")


def environment() -> dict[str, str | None]:
    """The Python version and the installed versions of the packages a verdict may depend on (recorded, not part
    of the fingerprint: CI pins them)."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in RECORDED_PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def fill_evidence(scope: Scope, assessed: dict[tuple[str, str], list[Assessed]]) -> None:
    """Put the usable evidence of each gate into the scope, and the reasons the rest was not used."""
    for key, entries in assessed.items():
        for entry in entries:
            if entry.usable:
                scope.evidence.setdefault(key, []).append((entry.label, entry.evidence.verdict, entry.evidence.reason))
            else:
                scope.refused.setdefault(key, []).append(entry.why)


def with_fingerprints(report: RunReport, fingerprints: Mapping[tuple[str, str], GateFingerprint], device: Device,
                      needs_gpu: Callable[[tuple[str, ...]], bool], simulated: set[tuple[str, str]]) -> RunReport:
    """Each gate's result with its fingerprint, the names of its inputs and the device it ran on: its evidence."""
    def filled(gate: Any) -> Any:
        found = fingerprints.get((gate.row, gate.gate))
        if found is None:
            return gate
        return replace(gate, fingerprint=found.fingerprint, inputs=tuple(sorted(found.inputs)),
                       device=device.describe(needs_gpu(gate.markers)), simulated=(gate.row, gate.gate) in simulated)

    rows = tuple(replace(r, gates=tuple(filled(g) for g in r.gates)) for r in report.rows)
    return replace(report, rows=rows)
