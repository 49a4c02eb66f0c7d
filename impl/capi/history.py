"""The header's version history, checked append-only: each version's members are a prefix of the next's (CAPI-3.1 to CAPI-3.5).

Reads the "[vN]" annotations and "vN +member" history lines of spec/include/vllm.h (mirrors the port's include/vllm.h).
"""
from __future__ import annotations

import re
from typing import Iterable

from impl.capi.abi import FIELD_SINCE, MEMBERS, VLLM_ABI_VERSION
from impl.capi.errors import AbiHistoryError

_MACRO = re.compile(r"#\s*define\s+VLLM_ABI_VERSION\s+(\S+)")
_ANNOTATION = re.compile(r"^\[v(\d+)\]")
_ENTRY = re.compile(r"^v(\d+)\s+(.*)$")
_MEMBER = re.compile(r"^(.*?)\b([A-Za-z_]\w*)\s*;$")


def _comment_text(line: str) -> str:
    """The text of a comment line with its ``/*``, ``*`` and ``*/`` markers removed."""
    return line.strip().removeprefix("/*").removesuffix("*/").strip().lstrip("*").strip()


def read_abi_version(text: str) -> int:
    """The value of the one ``#define VLLM_ABI_VERSION``."""
    values = [m.group(1) for line in text.splitlines() if (m := _MACRO.match(line.strip()))]
    if len(values) != 1 or not values[0].isdigit():
        raise AbiHistoryError(f"expected one '#define VLLM_ABI_VERSION <number>', found {values}")
    return int(values[0])


def read_members(text: str) -> list[tuple[str, int]]:
    """``(member, version)`` pairs of ``vllm_model_params`` in declaration order, from the "[vN]" annotations."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip().startswith("typedef struct vllm_model_params"))
    except StopIteration:
        raise AbiHistoryError("the header does not declare 'typedef struct vllm_model_params'") from None
    members: list[tuple[str, int]] = []
    comment: list[str] = []
    in_comment = False
    for line in lines[start + 1:]:
        stripped = line.strip()
        if stripped.startswith("}"):
            return members
        if in_comment or stripped.startswith("/*"):
            comment.append(_comment_text(stripped))
            in_comment = "*/" not in stripped
            continue
        if not stripped:
            continue
        declared = _MEMBER.match(stripped)
        if declared is None:
            raise AbiHistoryError(f"cannot read the member line {stripped!r}")
        annotation = _ANNOTATION.match(" ".join(comment).strip())
        if annotation is None:
            raise AbiHistoryError(f"member {declared.group(2)!r} has no '[vN]' annotation opening its comment")
        members.append((declared.group(2), int(annotation.group(1))))
        comment = []
    raise AbiHistoryError("the struct vllm_model_params is not closed")


def read_history(text: str) -> dict[int, list[str]]:
    """The members each history entry says its version appended ("+name" words)."""
    entries: dict[int, list[str]] = {}
    current: int | None = None
    for line in text.splitlines():
        if not line.lstrip().startswith("*"):
            current = None
            continue
        body = _comment_text(line)
        entry = _ENTRY.match(body)
        if entry:
            current = int(entry.group(1))
            if current in entries:
                raise AbiHistoryError(f"two history entries for v{current}")
            entries[current] = []
        elif not body or not line.startswith(" *        "):
            current = None
            continue
        if current is not None:
            entries[current] += [word[1:] for word in body.split() if word.startswith("+")]
    return {version: [name.rstrip(":,.;") for name in names] for version, names in entries.items()}


def field_history(members: Iterable[tuple[str, int]], abi_version: int,
                  entries: dict[int, list[str]] | None = None) -> dict[str, object]:
    """Each version's member list, ``{"abi_version": N, "versions": {"v1": [...], ..., "vN": [...]}}``.

    Every member has a version in 1..``abi_version``; versions never decrease along the struct (so each
    version's list is a prefix of the next); the newest member's version is ``abi_version``; and, when
    ``entries`` is given, each history entry names exactly the members annotated with its version.
    """
    ordered = list(members)
    names = [name for name, _ in ordered]
    if len(set(names)) != len(names):
        raise AbiHistoryError(f"a member is declared twice: {names}")
    for (before, v_before), (after, v_after) in zip(ordered, ordered[1:]):
        if v_after < v_before:
            raise AbiHistoryError(f"member {before!r} [v{v_before}] stands before {after!r} [v{v_after}]: "
                                  f"a v{v_before} member was inserted mid-struct, moving {after!r} for v{v_after} callers")
    if not ordered or ordered[0][1] < 1:
        raise AbiHistoryError(f"versions start at v1; got members {ordered}")
    newest = ordered[-1][1]
    if newest != abi_version:
        raise AbiHistoryError(f"VLLM_ABI_VERSION is {abi_version} but the newest member is from v{newest}: "
                              "a new member needs a version bump, and a bump needs a new member")
    if entries is not None:
        _check_entries(ordered, abi_version, entries)
    return {"abi_version": abi_version,
            "versions": {f"v{v}": [name for name, since in ordered if since <= v] for v in range(1, abi_version + 1)}}


def _check_entries(ordered: list[tuple[str, int]], abi_version: int, entries: dict[int, list[str]]) -> None:
    if sorted(entries) != list(range(1, abi_version + 1)):
        raise AbiHistoryError(f"the history needs exactly one entry for each of v1..v{abi_version}, "
                              f"it has {sorted(entries)}")
    for version, listed in entries.items():
        annotated = [name for name, since in ordered if since == version]
        if sorted(listed) != sorted(annotated):
            raise AbiHistoryError(f"the v{version} history entry appends {sorted(listed)} but the members "
                                  f"annotated [v{version}] are {sorted(annotated)}")


def header_history(header_text: str) -> dict[str, object]:
    """:func:`field_history` of a header's text: its annotations, its version macro, its history entries."""
    return field_history(read_members(header_text), read_abi_version(header_text), read_history(header_text))


def mirror_history() -> dict[str, object]:
    """:func:`field_history` of the ctypes mirror: its member order, ``FIELD_SINCE`` and ``VLLM_ABI_VERSION``."""
    return field_history(((name, FIELD_SINCE[name]) for name, _, _ in MEMBERS), VLLM_ABI_VERSION)
