"""Reading a C ABI header: the members of ``vllm_model_params``, the version of each, the version macro and the
version history, in either of the two conventions of CAPI-1.6.

- ``annotations`` (spec/include/vllm.h): each member's comment opens with "[vN]"; the history comment has one line
  per version, `` *   vN  text``, naming the members it appended as ``+member``.
- ``headings`` (the C++ port's include/vllm.h): a comment whose first line carries "(ABI vN)" heads the run of
  members that follows it (members before the first heading are v1); the version log is prose, one entry per
  version opening a comment line as ``vN:`` or ``vN —``, and an entry names a member it appended as
  ``vllm_model_params.<member>``.

In both, the history is the comments written before the ``#define VLLM_ABI_VERSION`` line (CAPI-1.7): a "vN:" remark
after it, on another struct's member or on an entry point, is documentation, never a log entry.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from impl.capi.errors import AbiHistoryError

ANNOTATIONS = "annotations"
HEADINGS = "headings"

_STRUCT_OPEN = "typedef struct vllm_model_params"
_MACRO = re.compile(r"#\s*define\s+VLLM_ABI_VERSION\s+(\S+)")
_ANNOTATION = re.compile(r"^\[v(\d+)\]")
_HEADING = re.compile(r"\(ABI v(\d+)\)")
_MEMBER = re.compile(r"^(.*?)\b([A-Za-z_]\w*)\s*;$")
_OUR_ENTRY = re.compile(r"^v(\d+)\s+(.*)$")
_PORT_ENTRY = re.compile(r"^v(\d+)(?::|\s+[\u2014\u2013-])(?:\s|$)")
_CLAIM = re.compile(r"(?<![\w.])vllm_model_params\.([A-Za-z_]\w*)")


@dataclass(frozen=True)
class Member:
    """One member of the struct as written: its name, its C type (spaces normalised) and its version."""

    name: str
    ctype: str
    since: int


@dataclass(frozen=True)
class HeaderFacts:
    """What a header says: its convention, version macro, members in order and version history.

    ``log`` maps each history entry's version to the members it names as appended: the ``+member`` words of an
    annotations header, the ``vllm_model_params.<member>`` names of a headings header.
    """

    convention: str
    abi_version: int
    members: tuple[Member, ...]
    log: Mapping[int, tuple[str, ...]] = field(default_factory=dict)


def comment_text(line: str) -> str:
    """The text of a comment line with its ``/*``, ``*`` and ``*/`` markers removed."""
    return line.strip().removeprefix("/*").removesuffix("*/").strip().lstrip("*").strip()


def read_abi_version(text: str) -> int:
    """The value of the one ``#define VLLM_ABI_VERSION``."""
    values = [m.group(1) for line in text.splitlines() if (m := _MACRO.match(line.strip()))]
    if len(values) != 1 or not values[0].isdigit():
        raise AbiHistoryError(f"expected one '#define VLLM_ABI_VERSION <number>', found {values}")
    return int(values[0])


def _struct_span(lines: list[str]) -> tuple[int, int]:
    """Indices of the ``typedef struct vllm_model_params`` line and of the line closing it."""
    try:
        start = next(i for i, line in enumerate(lines) if line.strip().startswith(_STRUCT_OPEN))
    except StopIteration:
        raise AbiHistoryError("the header does not declare 'typedef struct vllm_model_params'") from None
    for end in range(start + 1, len(lines)):
        if lines[end].strip().startswith("}"):
            return start, end
    raise AbiHistoryError("the struct vllm_model_params is not closed")


@dataclass
class _Declared:
    name: str
    ctype: str
    annotation: int | None  # "[vN]" opening its comment
    heading: int | None  # "(ABI vN)" on the first line of a comment before it


def _declarations(lines: list[str]) -> list[_Declared]:
    """Each member with the annotation and the heading of the comments written before it."""
    found: list[_Declared] = []
    blocks: list[list[str]] = []
    in_comment = False
    for line in lines:
        stripped = line.strip()
        if in_comment or stripped.startswith("/*"):
            if not in_comment:
                blocks.append([])
            blocks[-1].append(comment_text(stripped))
            in_comment = "*/" not in stripped
            continue
        if not stripped:
            continue
        declared = _MEMBER.match(stripped)
        if declared is None:
            raise AbiHistoryError(f"cannot read the member line {stripped!r}")
        annotation = _ANNOTATION.match(" ".join(" ".join(b) for b in blocks).strip())
        headings = [int(m.group(1)) for b in blocks if b and (m := _HEADING.search(b[0]))]
        ctype = " ".join(declared.group(1).replace("*", " * ").split())
        found.append(_Declared(declared.group(2), ctype, int(annotation.group(1)) if annotation else None,
                               headings[-1] if headings else None))
        blocks = []
    return found


def read_members(text: str) -> tuple[str, list[Member]]:
    """The convention and the members of ``vllm_model_params`` in declaration order, each with its version."""
    lines = text.splitlines()
    start, end = _struct_span(lines)
    declared = _declarations(lines[start + 1:end])
    if not declared:
        raise AbiHistoryError("struct vllm_model_params declares no member")
    if any(d.annotation is not None for d in declared):
        missing = next((d for d in declared if d.annotation is None), None)
        if missing is not None:
            raise AbiHistoryError(f"member {missing.name!r} has no '[vN]' annotation opening its comment")
        return ANNOTATIONS, [Member(d.name, d.ctype, d.annotation) for d in declared]  # type: ignore[arg-type]
    if not any(d.heading is not None for d in declared):
        raise AbiHistoryError(f"member {declared[0].name!r} has no '[vN]' annotation opening its comment, and the "
                              "struct has no '(ABI vN)' heading")
    members, current = [], 1
    for d in declared:
        current = d.heading if d.heading is not None else current
        members.append(Member(d.name, d.ctype, current))
    return HEADINGS, members


def history_comment_lines(text: str) -> list[list[str]]:
    """The comments before the ``#define VLLM_ABI_VERSION`` line, each as its lines without ``/*`` and ``*/`` (a
    line's leading spaces and ``*`` kept), scanned line by line (CAPI-1.7)."""
    lines = text.splitlines()
    macro = next((i for i, line in enumerate(lines) if _MACRO.match(line.strip())), None)
    if macro is None:
        read_abi_version(text)  # raises, naming what it found
    comments: list[list[str]] = []
    in_comment = False
    for line in lines[:macro]:
        rest: str | None = line
        while rest is not None:
            if not in_comment:
                if "/*" not in rest:
                    break
                rest = rest.split("/*", 1)[1]
                comments.append([])
                in_comment = True
            body, closes, after = rest.partition("*/")
            comments[-1].append(body)
            in_comment, rest = (False, after) if closes else (True, None)
    return comments


def read_annotation_history(text: str) -> dict[int, tuple[str, ...]]:
    """The ``+member`` words of each `` *   vN  text`` line of the history comment (continuations indented
    further)."""
    entries: dict[int, list[str]] = {}
    for comment in history_comment_lines(text):
        current: int | None = None
        for line in comment:
            body = comment_text(line)
            entry = _OUR_ENTRY.match(body) if line.lstrip().startswith("*") else None
            if entry:
                current = int(entry.group(1))
                if current in entries:
                    raise AbiHistoryError(f"the version history comment has two entries for v{current}")
                entries[current] = []
            elif not body or not line.startswith(" *        "):
                current = None
                continue
            if current is not None:
                entries[current] += [word[1:] for word in body.split() if word.startswith("+")]
    return {version: tuple(name.rstrip(":,.;") for name in names) for version, names in entries.items()}


def version_log_entries(comments: Iterable[Sequence[str]]) -> dict[int, tuple[str, ...]]:
    """Each ``vN:`` / ``vN —`` entry opening a line of ``comments`` (each a comment's lines), with the members it names
    as ``vllm_model_params.<member>``; an entry runs to the next entry or the end of its comment."""
    texts: dict[int, list[str]] = {}
    for comment in comments:
        current: int | None = None
        for line in comment:
            body = comment_text(line)
            entry = _PORT_ENTRY.match(body)
            if entry:
                current = int(entry.group(1))
                if current in texts:
                    raise AbiHistoryError(f"the version log before VLLM_ABI_VERSION has two entries for v{current}")
                texts[current] = []
            if current is not None:
                texts[current].append(body)
    return {version: tuple(dict.fromkeys(_CLAIM.findall(" ".join(parts)))) for version, parts in texts.items()}


def read_version_log(text: str) -> dict[int, tuple[str, ...]]:
    """The port's version log: the entries of the history comment (CAPI-1.6, CAPI-1.7)."""
    return version_log_entries(history_comment_lines(text))


def read_header(text: str) -> HeaderFacts:
    """Everything the history rule needs from a header's text, in the convention the header uses."""
    convention, members = read_members(text)
    log = read_annotation_history(text) if convention == ANNOTATIONS else read_version_log(text)
    return HeaderFacts(convention, read_abi_version(text), tuple(members), log)
