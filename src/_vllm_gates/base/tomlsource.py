"""Where a key of a TOML file is written: dotted keys parsed and written back, and the line that sets a key, through
`[section]` headers, dotted keys and inline tables (tomllib gives values, not lines). The TOML side of what
yamlsource.py does for YAML; the names of vllm-gates' own table in pyproject.toml (README, "Configuration")."""
from __future__ import annotations

import json
import re

TOOL_KEY = "vllm-gates"  # the key of vllm-gates' table under pyproject.toml's [tool]
SECTION = f"tool.{TOOL_KEY}"  # that table's header, as messages name it: [tool.vllm-gates]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_KEY_PART = r"""(?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)"""
_DOTTED_KEY = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"
_HEADER = re.compile(rf"^\s*\[\[?\s*({_DOTTED_KEY})\s*\]\]?\s*(#.*)?$")
_LINE_KEY = re.compile(rf"^\s*({_DOTTED_KEY})\s*=")
_INLINE_KEY = re.compile(rf"[{{,]\s*({_DOTTED_KEY})\s*=")


def key_parts(text: str) -> list[str] | None:
    """The parts of a dotted TOML key (`a."b.c".d` is a, b.c, d); None where ``text`` is not one."""
    if not re.fullmatch(rf"\s*{_DOTTED_KEY}\s*", text):
        return None
    parts = []
    for match in re.finditer(_KEY_PART, text):
        parts.append(_unquoted(match.group(0)))
    return parts


def _unquoted(part: str) -> str:
    if part.startswith('"'):
        try:
            return str(json.loads(part))  # a basic string's escapes are JSON's (but \\U, rare in a key)
        except ValueError:
            return part[1:-1]
    return part.strip("'")


def toml_key(parts: list[str] | tuple[str, ...]) -> str:
    """Parts written as one dotted TOML key, quoting those that are not bare keys (a milestone `v1.2`)."""
    return ".".join(part if _BARE_KEY.fullmatch(part) else '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'
                    for part in parts)


def key_line(lines: list[str], path: list[str]) -> int:
    """The 1-based line of ``lines`` (a TOML file) that reaches furthest along the key ``path``; 1 when none does."""
    best, found, section = 0, 1, []
    for number, line in enumerate(lines, start=1):
        header = _HEADER.match(line)
        if header:
            section = key_parts(header.group(1)) or []
            reach = len(section) if path[:len(section)] == section else 0
        else:
            reach = _line_reach(line, section, path)
        if reach > best:
            best, found = reach, number
    return found


def _line_reach(line: str, section: list[str], path: list[str]) -> int:
    """How far along ``path`` a `key = value` line of ``section`` reaches, its inline tables included."""
    written = _LINE_KEY.match(line)
    if written is None or path[:len(section)] != section:
        return 0
    reached = section + (key_parts(written.group(1)) or [])
    if path[:len(reached)] != reached:
        return 0
    depth = len(reached)
    for inner in _INLINE_KEY.finditer(line, written.end()):
        parts = key_parts(inner.group(1)) or []
        if parts and path[depth:depth + len(parts)] == parts:
            depth += len(parts)
    return depth



def setting_line(lines: list[str], key: str) -> int:
    """The line of a pyproject.toml's ``lines`` that sets ``key`` of `[tool.vllm-gates]` (a dotted key such as
    `implementations.cpp.command`); 1 where none does."""
    return key_line(lines, ["tool", TOOL_KEY, *(key_parts(key) or [key])])
