"""The compiler's ``vllm_status`` codes: each enumerator the header declares, with the value C gives it (CAPI-1.3).

The enumerators' names are read from the header's text (comments blanked); their values come from a compiled probe,
so an implicit value (`VLLM_ERR_RUNTIME,` after `= 2`) is the compiler's count, not a reading of the text.
"""
from __future__ import annotations

import re
from pathlib import Path

from oracles.abi.header import without_comments, block_comments
from oracles.abi.toolchain import build, run_program

_ENUM = re.compile(r"typedef\s+enum\s+vllm_status\s*\{(?P<body>[^}]*)\}\s*vllm_status\s*;")
_ENUMERATOR = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s*(?:=[^,]*)?$")

_PROBE = """\
#include <stdio.h>
#include "vllm.h"

int main(void) {{
{lines}  return 0;
}}
"""
_LINE = '  printf("{name} %lld\\n", (long long)(vllm_status){name});\n'


class StatusEnumMissing(ValueError):
    """The header declares no ``typedef enum vllm_status { ... } vllm_status;``."""


def enumerator_names(header_text: str) -> list[str]:
    """The names ``vllm_status`` declares, in order."""
    found = _ENUM.search(without_comments(header_text, block_comments(header_text)))
    if found is None:
        raise StatusEnumMissing("the header has no 'typedef enum vllm_status { ... } vllm_status;'")
    names = []
    for item in found["body"].split(","):
        if item.strip():
            declared = _ENUMERATOR.match(item)
            if declared is None:
                raise StatusEnumMissing(f"cannot read the enumerator {item.strip()!r} of vllm_status")
            names.append(declared["name"])
    return names


def header_status_codes(header: str | Path) -> list[list[object]]:
    """``[[name, code], ...]`` of the header at ``header``, in declaration order, codes as the compiler sees them."""
    text = Path(header).read_text(encoding="utf-8")
    names = enumerator_names(text)
    source = _PROBE.format(lines="".join(_LINE.format(name=name) for name in names))
    output = run_program(build("status_probe", text, source, shared=False))
    codes = []
    for line in output.splitlines():
        name, value = line.split(" ")
        codes.append([name, int(value)])
    return codes
