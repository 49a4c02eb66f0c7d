"""A mutation report (`vllm-gates/mutation/1`) restated in the mutation-testing-report-schema that Stryker's dashboard
and other mutation tools read (docs/mutation.md, "The report in the shared schema"): each mutated file with its source
and its mutants, each with its place, operator family, status and the gates that killed or ran it."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from _vllm_gates.mutation.mutate_operators import family

SCHEMA_VERSION = "2"
THRESHOLDS = {"high": 90, "low": 80}  # a row's score goal (docs/mutation.md) and the level below which it is poor
STATUS = {"killed": "Killed", "survived": "Survived", "timed_out": "Timeout", "not_covered": "NoCoverage",
          "not_compiling": "CompileError", "equivalent": "Ignored", "not_run_here": "Ignored"}
TOKEN_ENDS = frozenset(" \t()[]{},;:")  # what ends a token when a changed span is widened to whole tokens
LANGUAGE = {".py": "python", ".cpp": "cpp", ".cc": "cpp", ".h": "cpp", ".hpp": "cpp"}


def location(mutant: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The changed span (1-based line and column; end exclusive) and its replacement, read off the mutant's diff:
    the tokens of one changed line that differ, what it keeps in front and behind left out."""
    body = mutant.get("diff", "").splitlines()
    old = [line[1:] for line in body if line.startswith("-") and not line.startswith("---")]
    new = [line[1:] for line in body if line.startswith("+") and not line.startswith("+++")]
    line = int(mutant["line"])
    if len(old) == 1 and len(new) == 1:
        before, after = old[0], new[0]
        prefix = next((i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), min(len(before), len(after)))
        suffix = 0
        while suffix < min(len(before), len(after)) - prefix and before[-1 - suffix] == after[-1 - suffix]:
            suffix += 1
        while prefix and before[prefix - 1] not in TOKEN_ENDS:  # whole tokens: `<` to `<=`, not an empty span
            prefix -= 1
        while suffix and before[len(before) - suffix] not in TOKEN_ENDS:
            suffix -= 1
        return ({"start": {"line": line, "column": prefix + 1}, "end": {"line": line, "column": len(before) - suffix + 1}},
                after[prefix:len(after) - suffix])
    first = old[0] if old else ""
    indent = len(first) - len(first.lstrip())
    last = old[-1] if old else ""
    return ({"start": {"line": line, "column": indent + 1}, "end": {"line": line + max(len(old), 1) - 1,
                                                                    "column": len(last) + 1}},
            "\n".join(new))


def _mutant(row: str, mutant: Mapping[str, Any]) -> dict[str, Any]:
    where, replacement = location(mutant)
    record: dict[str, Any] = {"id": mutant["id"], "mutatorName": family(mutant["operator"]),
                              "description": mutant["operator"], "replacement": replacement, "location": where,
                              "status": STATUS[mutant["status"]],
                              "coveredBy": [f"{row}::{gate}" for gate in mutant.get("gates_run") or []],
                              "killedBy": [f"{row}::{gate}" for gate in mutant.get("killing_gates") or []]}
    killed_by, detail = mutant.get("killed_by"), mutant.get("detail")
    reason = (f"{killed_by['gate']} {killed_by['item']}: {killed_by.get('detail', '')}" if killed_by
              else detail if detail else "declared equivalent" if mutant["status"] == "equivalent" else None)
    if reason:
        record["statusReason"] = reason
    return record


def schema_report(document: Mapping[str, Any], root: Path) -> dict[str, Any]:
    """The shared-schema report of a `gates mutate` report; file sources are read from ``root`` as they are now."""
    files: dict[str, dict[str, Any]] = {}
    for row in document.get("rows", []):
        for mutant in row.get("mutants", []):
            name = mutant["file"]
            if name not in files:
                try:
                    source = (root / name).read_text(encoding="utf-8")
                except OSError:
                    source = ""
                files[name] = {"language": LANGUAGE.get(Path(name).suffix, "text"), "source": source, "mutants": []}
            files[name]["mutants"].append(_mutant(row["row"], mutant))
    tests: dict[str, dict[str, Any]] = {}
    for row in document.get("rows", []):
        tests[f"row {row['row']}"] = {"tests": [{"id": f"{row['row']}::{gate['gate']}", "name": gate["gate"]}
                                               for gate in row.get("gates", [])]}
    return {"schemaVersion": SCHEMA_VERSION, "thresholds": dict(THRESHOLDS), "projectRoot": str(root),
            "files": files, "testFiles": tests,
            "framework": {"name": "vllm-gates", "version": str(document.get("engine", ""))},
            "config": {key: document.get(key) for key in ("impl", "seed", "first_kill", "changed_since", "families")}}
