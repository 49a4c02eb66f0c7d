"""The oracle's own reading of a C ABI header: fields, their versions, version macro, history (CAPI-1.6, CAPI-3.1).

Two conventions: spec/include/vllm.h's "[vN]" annotations with "vN +member" history lines, and the C++ port's
include/vllm.h, whose "(ABI vN)" comment headings version the members after them and whose prose version log has
"vN:" / "vN —" entries naming members as vllm_model_params.<member>. In both, the history is what the comments
before the version macro say: the header is cut into tokens (comments, with their offsets, apart from string literals
and line comments) and the block comments that end before "#define VLLM_ABI_VERSION" are read (CAPI-1.7). The
compiler checks the rest.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

STRUCT_NAME = "vllm_model_params"

_STRUCT = re.compile(r"typedef\s+struct\s+" + STRUCT_NAME + r"\s*\{(?P<body>.*?)\}\s*" + STRUCT_NAME + r"\s*;", re.S)
_MEMBER = re.compile(r"(?P<comments>(?:/\*.*?\*/\s*)*)(?P<decl>[^;/]+);", re.S)
_COMMENT = re.compile(r"/\*(?P<text>.*?)\*/", re.S)
_HEADING = re.compile(r"\(ABI v(?P<version>[0-9]+)\)")
_LOG_ENTRY = re.compile(r"^[ \t]*\**[ \t]*v(?P<version>[0-9]+)(?::|[ \t]+[\u2014\u2013-])(?=\s|\Z)", re.M)
_CLAIM = re.compile(r"(?<![\w.])vllm_model_params\.([A-Za-z_]\w*)")
ANNOTATIONS, HEADINGS = "annotations", "headings"
_DECL = re.compile(r"(?P<ctype>[A-Za-z_][\w\s]*?[\s*]+)(?P<name>[A-Za-z_]\w*)")
_SINCE = re.compile(r"/\*\s*\[v(?P<version>[0-9]+)\]")
_VERSION = re.compile(r"^[ \t]*#[ \t]*define[ \t]+VLLM_ABI_VERSION[ \t]+(?P<version>\S+)[ \t\r]*$", re.M)
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
    """What the header declares: the version macro, the members in order, the history entries (each entry's
    ``+member`` words, or in the port's convention the ``vllm_model_params.<member>`` names it mentions), and
    which of the two conventions it is written in."""

    abi_version: int
    fields: tuple[DeclaredField, ...]
    history: dict[int, tuple[str, ...]]
    convention: str = ANNOTATIONS


def read_header(text: str) -> HeaderFacts:
    """Read the declarations of ``text``; raise AbiHistoryError naming what is missing or malformed."""
    convention, fields = _read_fields(text)
    history_comments = _history_comments(text)
    history = _read_history(history_comments) if convention == ANNOTATIONS else _read_port_log(history_comments)
    return HeaderFacts(_read_version(text), fields, history, convention)


@dataclass(frozen=True)
class Comment:
    """A block comment of the header: where it starts and ends (offsets of ``/*`` and past ``*/``) and its text."""

    start: int
    end: int
    text: str


_TOKEN = re.compile(r'/\*(?P<block>.*?)\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def block_comments(text: str) -> list[Comment]:
    """Every ``/* ... */`` of the header in order, string and character literals and ``//`` comments skipped."""
    return [Comment(t.start(), t.end(), t["block"]) for t in _TOKEN.finditer(text) if t["block"] is not None]


def without_comments(text: str, comments: list[Comment]) -> str:
    """``text`` with each block comment blanked (line ends kept), so its offsets still hold."""
    out, at = [], 0
    for comment in comments:
        out += [text[at:comment.start], re.sub(r"[^\n]", " ", text[comment.start:comment.end])]
        at = comment.end
    return "".join(out) + text[at:]


def _history_comments(text: str) -> list[str]:
    """The texts of the block comments that end before the ``#define VLLM_ABI_VERSION`` line (CAPI-1.7)."""
    _read_version(text)  # one macro, or AbiHistoryError naming what was found
    comments = block_comments(text)
    macro = _VERSION.search(without_comments(text, comments))
    return [c.text for c in comments if macro is not None and c.end <= macro.start()]


def _read_version(text: str) -> int:
    found = _VERSION.findall(without_comments(text, block_comments(text)))
    if len(found) != 1 or not found[0].isdigit():
        raise AbiHistoryError(f"the header must define VLLM_ABI_VERSION once as a decimal number, found {found!r}")
    return int(found[0])


def _read_fields(text: str) -> tuple[str, tuple[DeclaredField, ...]]:
    struct = _STRUCT.search(text)
    if struct is None:
        raise AbiHistoryError(f"the header has no 'typedef struct {STRUCT_NAME} {{ ... }} {STRUCT_NAME};'")
    declared = []  # (name, ctype, "[vN]" of the first comment, last "(ABI vN)" heading among the comments)
    for member in _MEMBER.finditer(struct["body"]):
        decl = _DECL.fullmatch(" ".join(member["decl"].split()))
        if decl is None:
            raise AbiHistoryError(f"cannot read the member declaration {member['decl'].strip()!r}")
        comments = [c["text"] for c in _COMMENT.finditer(member["comments"])]
        since = _SINCE.match(member["comments"].strip())
        first_lines = [c.strip().splitlines()[0] for c in comments if c.strip()]
        headings = [int(h["version"]) for line in first_lines if (h := _HEADING.search(line))]
        ctype = " ".join(decl["ctype"].replace("*", " * ").split())
        declared.append((decl["name"], ctype, int(since["version"]) if since else None,
                         headings[-1] if headings else None))
    if not declared:
        raise AbiHistoryError(f"struct {STRUCT_NAME} declares no member")
    if any(annotated is not None for _, _, annotated, _ in declared):
        for name, _, annotated, _ in declared:
            if annotated is None:
                raise AbiHistoryError(f"member {name!r} has no '[vN]' annotation opening its comment")
        return ANNOTATIONS, tuple(DeclaredField(n, t, a) for n, t, a, _ in declared)  # type: ignore[arg-type]
    if all(heading is None for _, _, _, heading in declared):
        raise AbiHistoryError(f"member {declared[0][0]!r} has no '[vN]' annotation opening its comment and no "
                              "'(ABI vN)' heading stands before it")
    fields, version = [], 1
    for name, ctype, _, heading in declared:
        version = version if heading is None else heading
        fields.append(DeclaredField(name, ctype, version))
    return HEADINGS, tuple(fields)


def _read_port_log(history_comments: list[str]) -> dict[int, tuple[str, ...]]:
    """The port's version log in the history comments: an entry opens a line with "vN:" or "vN —" and its text runs
    to the next entry's start or the comment's end; its value is the vllm_model_params.<member> names it mentions."""
    log: dict[int, tuple[str, ...]] = {}
    for comment in history_comments:
        starts = list(_LOG_ENTRY.finditer(comment))
        for entry, after in zip(starts, [*starts[1:], None]):
            version = int(entry["version"])
            if version in log:
                raise AbiHistoryError(f"the version log has two entries for v{version} in its history comments")
            log[version] = tuple(dict.fromkeys(_CLAIM.findall(comment[entry.start():after.start() if after else None])))
    return log


def _read_history(history_comments: list[str]) -> dict[int, tuple[str, ...]]:
    history: dict[int, list[str]] = {}
    for comment in history_comments:
        current: int | None = None
        for line in comment.splitlines():
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
