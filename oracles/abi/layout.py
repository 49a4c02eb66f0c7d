"""The compiler's layout of vllm_model_params: sizeof, and every member's offset, size and type (CAPI-2.1 to CAPI-2.5).

A generated C probe is compiled against the header and run; mirrors the struct of the C++ port's include/vllm.h.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from oracles.abi.header import STRUCT_NAME, read_header
from oracles.abi.toolchain import build, run_program

# C11 _Generic names the type the compiler sees; anything not listed is "other".
_TYPE_NAMES = ("int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
               "float", "double", "const char *", "char *", "const void *", "void *")

_PROBE = """\
#include <stddef.h>
#include <stdio.h>
#include "vllm.h"

#define VLLM_TYPE_NAME(x) _Generic((x), {associations}, default: "other")

int main(void) {{
  {struct} probe;
  (void)probe;
  printf("sizeof %zu\\n", sizeof({struct}));
  printf("alignof %zu\\n", _Alignof({struct}));
{lines}  return 0;
}}
"""
_LINE = '  printf("field {name} %zu %zu %s\\n", offsetof({struct}, {name}), sizeof(probe.{name}), VLLM_TYPE_NAME(probe.{name}));\n'


class LayoutError(RuntimeError):
    """The measured members do not tile the struct: the header declares something the reader missed."""


@dataclass(frozen=True)
class MeasuredField:
    """One member as the compiler lays it out."""

    name: str
    offset: int
    size: int
    ctype: str
    since: int


@dataclass(frozen=True)
class MeasuredLayout:
    """The struct as the compiler lays it out, members in declaration order."""

    size: int
    align: int
    fields: tuple[MeasuredField, ...]

    def as_table(self) -> dict[str, object]:
        """Plain data: sizeof and one [name, C type, offset, size, version] row per member."""
        return {"sizeof": self.size, "fields": [[f.name, f.ctype, f.offset, f.size, f.since] for f in self.fields]}


def probe_source(member_names: tuple[str, ...]) -> str:
    """C source printing sizeof, alignof and each member's offset, size and type name."""
    associations = ", ".join(f'{name}: "{name}"' for name in _TYPE_NAMES)
    lines = "".join(_LINE.format(name=name, struct=STRUCT_NAME) for name in member_names)
    return _PROBE.format(associations=associations, struct=STRUCT_NAME, lines=lines)


def measure(header_text: str) -> MeasuredLayout:
    """Compile and run the probe for ``header_text``; check that the members tile the struct."""
    declared = {field.name: field.since for field in read_header(header_text).fields}
    output = run_program(build("layout_probe", header_text, probe_source(tuple(declared)), shared=False))
    size = align = -1
    measured = []
    for line in output.splitlines():
        word, _, rest = line.partition(" ")
        if word == "sizeof":
            size = int(rest)
        elif word == "alignof":
            align = int(rest)
        elif word == "field":
            name, offset, width, ctype = rest.split(" ", 3)
            measured.append(MeasuredField(name, int(offset), int(width), ctype, declared[name]))
    layout = MeasuredLayout(size, align, tuple(measured))
    _check_tiling(layout)
    return layout


def _check_tiling(layout: MeasuredLayout) -> None:
    """Each member starts at or after the previous one's end, within the alignment, and the sizeof closes it."""
    end = 0
    for field in sorted(layout.fields, key=lambda f: f.offset):
        if not end <= field.offset < end + max(field.size, 1) or field.offset - end >= layout.align:
            raise LayoutError(f"member {field.name} at offset {field.offset} leaves a gap after byte {end}: "
                              "the header declares a member this reader did not see")
        end = field.offset + field.size
    if not end <= layout.size < end + layout.align:
        raise LayoutError(f"sizeof {layout.size} does not close the members ending at byte {end}")


def header_layout(header: str | Path) -> dict[str, object]:
    """The layout table of the header at ``header``: ``{"sizeof": n, "fields": [[name, ctype, offset, size, since]]}``."""
    return measure(Path(header).read_text(encoding="utf-8")).as_table()
