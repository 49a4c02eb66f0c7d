"""The oracle's own reading of a C ABI header: fields, "[vN]" annotations, version macro, history (CAPI-3.1).

Reads the text of spec/include/vllm.h (mirrors the C++ port's include/vllm.h); the compiler checks the rest.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

STRUCT_NAME = "vllm_model_params"

_STRUCT = re.compile(r"typedef\s+struct\s+" + STRUCT_NAME + r"\s*\{(?P<body>.*?)\}\s*" + STRUCT_NAME + r"\s*;", re.S)
_MEMBER = re.compile(r"(?P<comment>/\*.*?\*/)?\s*(?P<decl>[^;/]+);", re.S)
_DECL = re.compile(r"(?P<ctype>[A-Za-z_][\w\s]*?[\s*]+)(?P<name>[A-Za-z_]\w*)")
_SINCE = re.compile(r"/\*\s*\[v(?P<version>[0-9]+)\]")
_VERSION = re.compile(r"^\s*#\s*define\s+VLLM_ABI_VERSION\s+(?P<version>\S+)\s*$", re.M)
_HISTORY_LINE = re.compile(r"^\s*\*\s+v(?P<version>[0-9]+)\s(?P<text>.*)$")
_CONTINUATION = re.compile(r"^\s*\*\s{4,}(?P<text>\S.*)$")
_ADDED = re.compile(r"\+([A-Za-z_]\w*)")


class AbiHistoryError(ValueError):
    """The header breaks a history rule, or its annotations cannot be read."""


@dataclass(frozen=True)
class DeclaredField:
    """One member of the struct as written: its C type, its name and the version that added it."""

    name: str
    ctype: str
    since: int


@dataclass(frozen=True)
class HeaderFacts:
    """What the header declares: the version macro, the members in order, the history entries."""

    abi_version: int
    fields: tuple[DeclaredField, ...]
    history: dict[int, tuple[str, ...]]


def read_header(text: str) -> HeaderFacts:
    """Read the declarations of ``text``; raise AbiHistoryError naming what is missing or malformed."""
    return HeaderFacts(_read_version(text), _read_fields(text), _read_history(text))


def _read_version(text: str) -> int:
    found = _VERSION.findall(text)
    if len(found) != 1 or not found[0].isdigit():
        raise AbiHistoryError(f"the header must define VLLM_ABI_VERSION once as a decimal number, found {found!r}")
    return int(found[0])


def _read_fields(text: str) -> tuple[DeclaredField, ...]:
    struct = _STRUCT.search(text)
    if struct is None:
        raise AbiHistoryError(f"the header has no 'typedef struct {STRUCT_NAME} {{ ... }} {STRUCT_NAME};'")
    members = []
    for member in _MEMBER.finditer(struct["body"]):
        decl = _DECL.fullmatch(" ".join(member["decl"].split()))
        if decl is None:
            raise AbiHistoryError(f"cannot read the member declaration {member['decl'].strip()!r}")
        since = _SINCE.match(member["comment"] or "")
        if since is None:
            raise AbiHistoryError(f"member {decl['name']!r} has no '[vN]' annotation opening its comment")
        ctype = " ".join(decl["ctype"].replace("*", " * ").split())
        members.append(DeclaredField(decl["name"], ctype, int(since["version"])))
    if not members:
        raise AbiHistoryError(f"struct {STRUCT_NAME} declares no member")
    return tuple(members)


def _read_history(text: str) -> dict[int, tuple[str, ...]]:
    history: dict[int, list[str]] = {}
    current: int | None = None
    for line in text.splitlines():
        entry = _HISTORY_LINE.match(line)
        if entry:
            current = int(entry["version"])
            if current in history:
                raise AbiHistoryError(f"the version history has two entries for v{current}")
            history[current] = _ADDED.findall(entry["text"])
            continue
        more = _CONTINUATION.match(line) if current is not None else None
        if more:
            history[current].extend(_ADDED.findall(more["text"]))  # type: ignore[index]
        else:
            current = None
    return {version: tuple(names) for version, names in history.items()}


_STATUS_ENUM = re.compile(r"typedef\s+enum\s+vllm_status\s*\{(?P<body>.*?)\}\s*vllm_status\s*;", re.S)
_STATUS_ITEM = re.compile(r"(?P<name>VLLM_\w+)\s*=\s*(?P<value>[0-9]+)")


def read_status_codes(text: str) -> dict[int, str]:
    """The ``vllm_status`` enum of the header as value -> name."""
    enum = _STATUS_ENUM.search(re.sub(r"/\*.*?\*/", " ", text, flags=re.S))
    if enum is None:
        raise AbiHistoryError("the header has no 'typedef enum vllm_status { ... } vllm_status;'")
    return {int(item["value"]): item["name"] for item in _STATUS_ITEM.finditer(enum["body"])}
