"""Case inputs of the ROAD-V1-MEM M3 profile gates: recorded snapshot fixtures (or inline snapshots) made into calls.

A case input is either `{fixture: NAME, ...overrides}` naming gates/rows/road_v1_mem/fixtures/snapshots/NAME.yaml, or the same
fields inline: device, gpu_memory_utilization, weights_memory, snapshots {before_create, before_profile,
after_profile} (each {torch_peak, free_memory, total_memory, torch_memory, timestamp}, optionally
torch_allocated), and for the block gates kv {num_layers, block_size, num_kv_heads, head_size, dtype},
kv_cache_memory_bytes and profiled (false: no profile exists).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from vllm_gates import Call

FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures" / "snapshots"
PHASES = ("before_create", "before_profile", "after_profile")
SNAPSHOT_FIELDS = ("torch_peak", "free_memory", "total_memory", "torch_memory", "timestamp")
OPTIONAL_SNAPSHOT_FIELDS = ("torch_allocated",)  # absent: min(torch_peak, torch_memory), as impl's MemorySnapshot
KV_FIELDS = ("num_layers", "block_size", "num_kv_heads", "head_size", "dtype")
_REQUIRED = {"device", "gpu_memory_utilization", "weights_memory", "snapshots"}
_OPTIONAL = {"kv", "kv_cache_memory_bytes", "profiled", "source", "logged"}
_FIXTURE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def load_fixture(name: str) -> dict[str, Any]:
    """The recorded fixture gates/rows/road_v1_mem/fixtures/snapshots/NAME.yaml as plain data."""
    if not isinstance(name, str) or not _FIXTURE_NAME.match(name):
        raise ValueError(f"fixture must be a name like 'phi4-gptq-a100-util015', got {name!r}")
    path = FIXTURE_DIR / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in FIXTURE_DIR.glob("*.yaml")))
        raise ValueError(f"fixture {name!r}: no file {path} (known: {known})")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"fixture {name!r}: {path} must hold a mapping")
    return data


def resolve_input(data: Mapping[str, Any]) -> dict[str, Any]:
    """The case input with its fixture (if any) loaded and the case's fields laid over it."""
    if not isinstance(data, Mapping):
        raise TypeError(f"a profile case input must be a mapping, got {type(data).__name__}")
    fields = dict(data)
    if "fixture" in fields:
        fields = {**load_fixture(fields.pop("fixture")), **fields}
    unknown = set(fields) - _REQUIRED - _OPTIONAL
    missing = _REQUIRED - set(fields)
    if unknown or missing:
        raise ValueError(f"profile case input: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}")
    snapshots = fields["snapshots"]
    if not isinstance(snapshots, Mapping) or set(snapshots) != set(PHASES):
        raise ValueError(f"profile case input: snapshots must have exactly {list(PHASES)}, got {snapshots!r}")
    for phase in PHASES:
        keys = set(snapshots[phase]) if isinstance(snapshots[phase], Mapping) else None
        if keys is None or not set(SNAPSHOT_FIELDS) <= keys <= set(SNAPSHOT_FIELDS + OPTIONAL_SNAPSHOT_FIELDS):
            raise ValueError(f"profile case input: snapshots.{phase} must have exactly {list(SNAPSHOT_FIELDS)}, "
                             f"optionally {list(OPTIONAL_SNAPSHOT_FIELDS)}, got {snapshots[phase]!r}")
    if "kv" in fields and (not isinstance(fields["kv"], Mapping) or set(fields["kv"]) != set(KV_FIELDS)):
        raise ValueError(f"profile case input: kv must have exactly {list(KV_FIELDS)}, got {fields['kv']!r}")
    return fields


def raw_snapshots(fields: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The three snapshots as plain mappings (device included), for the oracle."""
    return {phase: {"device": fields["device"], **fields["snapshots"][phase]} for phase in PHASES}


def _impl_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The raw readings the impl-side subjects build their snapshots from (subjects_profile.py)."""
    return {"device": fields["device"], "snapshots": {phase: dict(fields["snapshots"][phase]) for phase in PHASES},
            "weights_memory": fields["weights_memory"]}


def budget_call(data: Mapping[str, Any]) -> Call:
    """impl side of profile-kv-budget: the raw readings and the utilization (the subject builds the profile)."""
    fields = resolve_input(data)
    return Call(kwargs={**_impl_fields(fields), "gpu_memory_utilization": fields["gpu_memory_utilization"]})


def budget_oracle_call(data: Mapping[str, Any]) -> Call:
    """oracle side of profile-kv-budget: the raw snapshots, weights and utilization."""
    fields = resolve_input(data)
    snapshots = raw_snapshots(fields)
    return Call(kwargs={"baseline": snapshots["before_create"], "before_profile": snapshots["before_profile"],
                        "after_profile": snapshots["after_profile"], "weights_memory": fields["weights_memory"],
                        "gpu_memory_utilization": fields["gpu_memory_utilization"]})


def blocks_call(data: Mapping[str, Any]) -> Call:
    """impl side of profile-util-blocks: the raw readings, the layer geometry and the knobs."""
    fields = resolve_input(data)
    return Call(kwargs={**_impl_fields(fields), "gpu_memory_utilization": fields["gpu_memory_utilization"],
                        "kv": dict(fields["kv"]), "kv_cache_memory_bytes": fields.get("kv_cache_memory_bytes", 0),
                        "profiled": fields.get("profiled", True)})


def blocks_oracle_call(data: Mapping[str, Any]) -> Call:
    """oracle side of profile-util-blocks: the raw snapshots, the layer geometry and the knobs."""
    fields = resolve_input(data)
    budget = budget_oracle_call(data).kwargs
    return Call(kwargs={**budget, **fields["kv"], "kv_cache_memory_bytes": fields.get("kv_cache_memory_bytes", 0),
                        "profiled": fields.get("profiled", True)})


def upstream_case_call(data: Mapping[str, Any]) -> Call:
    """oracle side of upstream-profile-kv-budget: the resolved case, fixture loaded (upstream/gates_fit.py)."""
    return Call(kwargs={"case": resolve_input(data)})
