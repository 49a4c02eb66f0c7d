"""Append-only history of vllm_model_params, by compiling each version's struct (CAPI-3.1 to CAPI-3.6).

Each version's members, in header order, are laid out alone and compared with the real struct (the port's include/vllm.h).
"""
from __future__ import annotations

from pathlib import Path

from oracles.abi.header import ANNOTATIONS, STRUCT_NAME, AbiHistoryError, DeclaredField, HeaderFacts, read_header
from oracles.abi.toolchain import build, run_program

_PROBE = """\
#include <stddef.h>
#include <stdio.h>
#include "vllm.h"

{structs}
int main(void) {{
{lines}  return 0;
}}
"""


def _version_struct(version: int, members: list[DeclaredField]) -> str:
    body = "".join(f"  {m.ctype} {m.name};\n" for m in members)
    return f"struct abi_v{version} {{\n{body}}};\n"


def _offset_lines(version: int, members: list[DeclaredField]) -> str:
    out = f'  printf("end {version} %zu\\n", sizeof(struct abi_v{version}));\n'
    for m in members:
        out += (f'  printf("member {version} {m.name} %zu %zu %zu\\n", offsetof(struct abi_v{version}, {m.name}), '
                f'offsetof({STRUCT_NAME}, {m.name}), sizeof((({STRUCT_NAME} *)0)->{m.name}));\n')
    return out


def _check_versions(facts: HeaderFacts) -> None:
    """Names once each; no member past the macro; every version from v1 to the macro appended a member or has a
    history entry (a bump for entry points only); the history's entries agree with the members' versions."""
    names = [m.name for m in facts.fields]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise AbiHistoryError(f"members declared twice: {repeated}")
    unversioned = [m.name for m in facts.fields if m.since < 1]
    if unversioned:
        raise AbiHistoryError(f"members {unversioned} are annotated [v0]; versions start at v1")
    newest = max(m.since for m in facts.fields)
    if newest > facts.abi_version:
        raise AbiHistoryError(f"VLLM_ABI_VERSION is {facts.abi_version} but the newest member was added in "
                              f"v{newest}: a new member needs a bump")
    extra = sorted(v for v in facts.history if not 1 <= v <= facts.abi_version)
    if extra:
        raise AbiHistoryError(f"the version history has entries {extra} outside v1..v{facts.abi_version}")
    added = {v: sorted(m.name for m in facts.fields if m.since == v) for v in range(1, facts.abi_version + 1)}
    for version, annotated in added.items():
        if not annotated and version not in facts.history:
            raise AbiHistoryError(f"v{version} added no member and the version history has no entry for it: "
                                  "an unexplained bump")
    if facts.convention == ANNOTATIONS:
        for version, annotated in added.items():
            if version not in facts.history:
                raise AbiHistoryError(f"the version history has no entry for v{version}")
            listed = sorted(facts.history[version])
            if annotated != listed:
                raise AbiHistoryError(f"v{version}: members annotated [v{version}] are {annotated}, "
                                      f"the history entry lists {listed}")
        return
    version_of = {m.name: m.since for m in facts.fields}
    for version, mentioned in facts.history.items():
        for name in mentioned:
            if version_of.get(name) != version:
                where = "is not a member" if name not in version_of else f"is headed v{version_of[name]}"
                raise AbiHistoryError(f"the v{version} log entry names vllm_model_params.{name}, which {where}")


def compiled_history(header_text: str) -> dict[str, object]:
    """``{"abi_version": N, "versions": {"vN": [members]}}`` after the compiler confirms every version is a prefix.

    Raises AbiHistoryError when a version's members move in the full struct (a member inserted before
    them) or when a later member sits inside an earlier version's extent.
    """
    facts = read_header(header_text)
    _check_versions(facts)
    per_version = {v: [m for m in facts.fields if m.since <= v] for v in range(1, facts.abi_version + 1)}
    structs = "".join(_version_struct(v, ms) for v, ms in per_version.items() if ms)
    lines = "".join(_offset_lines(v, ms) for v, ms in per_version.items() if ms)
    output = run_program(build("history_probe", header_text, _PROBE.format(structs=structs, lines=lines), shared=False))
    full_offsets: dict[str, int] = {}
    ends: dict[int, int] = {}
    for line in output.splitlines():
        word, *rest = line.split()
        if word == "member":
            version, name, own, full, size = int(rest[0]), rest[1], int(rest[2]), int(rest[3]), int(rest[4])
            if own != full:
                raise AbiHistoryError(f"v{version} member {name} is at offset {own} in the v{version} struct "
                                      f"but at {full} in the current one: a member was inserted before it")
            full_offsets[name] = full
            ends[version] = max(ends.get(version, 0), own + size)
    for version, members in per_version.items():
        own = {m.name for m in members}
        intruders = sorted(n for n, off in full_offsets.items() if off < ends.get(version, 0) and n not in own)
        if intruders:
            raise AbiHistoryError(f"members {intruders} sit inside the v{version} layout but were added later")
    return {"abi_version": facts.abi_version,
            "versions": {f"v{v}": [m.name for m in ms] for v, ms in per_version.items()}}


def header_history(header: str | Path) -> dict[str, object]:
    """:func:`compiled_history` of the header file at ``header``."""
    return compiled_history(Path(header).read_text(encoding="utf-8"))
