"""Builders for the CAPI-ABI gates: case data -> headers, compiled libraries, structs and KV probes.

Input shapes (YAML-friendly):

- a *header* input is ``{header: spec}`` (spec/include/vllm.h as written), ``{header: configured}`` (the
  implementation's ``header`` setting, by default spec/include/vllm.h), ``{fixture: NAME}`` (a header under
  ``fixtures/``, optionally with ``edits: [[old, new], ...]``, each ``old`` found exactly once and replaced in
  order), ``{variant: NAME}`` (one of ``VARIANTS``, rendered from the v16 member list), or
  ``{members: [[name, C type, since], ...], abi_version: N, history: {N: [names]}, style: annotations|headings}``
  (rendered as given, in our "[vN]" convention or the port's "(ABI vN)" one; default annotations);
- a *library* input is ``{library: spec|configured|foreign|VARIANT}`` or ``{library: {fixture: NAME}}``:
  ``configured`` is the implementation's ``library`` setting, by default the stand-in built from the configured
  header; the others are handshake libraries built from that header (``foreign`` exports no vllm symbol);
- a *probe* is ``{layers, num_kv_heads, head_size, block_size, dtype}`` (one full-attention group);
  its bytes per block is 2 * block_size * num_kv_heads * head_size * dtype size * layers;
- a struct member given as a list of ints is raw bytes (e.g. invalid UTF-8); text is UTF-8.

A missing C compiler skips the gate item with the reason (CAPI-2.6): it is never a pass.
"""
from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any, Mapping, Sequence

import pytest
import torch

import vllm_gates
from vllm_gates import Call
from impl.capi.abi import MEMBERS, ModelParams
from impl.capi.layout import C_TYPE_NAMES
from impl.entrypoints.model_loader import EngineParams
from impl.v1 import kv_cache_interface as kv
from oracles.abi.library import handshake_library, stand_in_library
from oracles.abi.toolchain import CompilerUnavailable, build, find_compiler

ROOT = Path(__file__).resolve().parents[3]
SPEC_HEADER = ROOT / "spec" / "include" / "vllm.h"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
HEADER_SETTING, LIBRARY_SETTING = "header", "library"
V16_MEMBERS: tuple[tuple[str, str, int], ...] = tuple((n, C_TYPE_NAMES[t], s) for n, t, s in MEMBERS)
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "uint8": torch.uint8}
DEFAULT_PROBE = {"layers": 2, "num_kv_heads": 2, "head_size": 64, "block_size": 16, "dtype": "float32"}

_TEMPLATE = """\
/* vllm.h rendered by gates/inputs/capi.py for a CAPI-ABI gate case.
 *
 * Version history:
{history} */
#ifndef VLLM_H_
#define VLLM_H_

#include <stdint.h>

#define VLLM_ABI_VERSION {version}

typedef enum vllm_status {{
  VLLM_OK = 0,
  VLLM_ERR_INVALID_ARGUMENT = 1,
  VLLM_ERR_MODEL_LOAD = 2,
  VLLM_ERR_RUNTIME = 3,
  VLLM_ERR_UNKNOWN = 4
}} vllm_status;

typedef struct vllm_model_params {{
{members}}} vllm_model_params;

vllm_model_params vllm_model_params_default(void);
int32_t vllm_abi_version(void);

#endif
"""


def require_compiler() -> None:
    """Skip the running gate item, with the reason, when no C compiler works here."""
    try:
        find_compiler()
    except CompilerUnavailable as exc:
        pytest.skip(f"compiled C ABI oracle unavailable: {exc}")


def _setting(name: str) -> str | None:
    """The implementation's setting ``name`` (``vllm_gates.settings()``; none for the default Python port)."""
    value = getattr(vllm_gates, "settings", lambda: {})().get(name)
    return value or None


def configured_header() -> Path:
    """The header the implementation names (its ``header`` setting, relative to the project root), else the spec's."""
    value = _setting(HEADER_SETTING)
    return SPEC_HEADER if value is None else ROOT / value


def configured_library() -> Path:
    """The library the implementation names (its ``library`` setting), else the stand-in built from the configured
    header."""
    value = _setting(LIBRARY_SETTING)
    return stand_in_library(configured_header()) if value is None else ROOT / value


def configured_library_or_none() -> str | None:
    """The implementation's ``library`` setting as a path, or None where the stand-in stands for it."""
    value = _setting(LIBRARY_SETTING)
    return None if value is None else str(ROOT / value)


def fixture_text(name: str) -> str:
    """The text of ``fixtures/NAME`` (a plain file name: no folder, no way out of ``fixtures/``)."""
    if not isinstance(name, str) or Path(name).name != name or not (FIXTURES / name).is_file():
        known = sorted(p.name for p in FIXTURES.glob("*.h"))
        raise KeyError(f"unknown header fixture {name!r}; known: {known}")
    return (FIXTURES / name).read_text(encoding="utf-8")


def edited(text: str, edits: Any, fixture: str) -> str:
    """``text`` with each ``[old, new]`` of ``edits`` applied in order; an ``old`` must occur exactly once."""
    if not isinstance(edits, (list, tuple)):
        raise ValueError(f"edits of fixture {fixture!r} are a list of [old text, new text], got {edits!r}")
    for index, edit in enumerate(edits):
        if not (isinstance(edit, (list, tuple)) and len(edit) == 2 and all(isinstance(part, str) for part in edit)):
            raise ValueError(f"edits[{index}] of fixture {fixture!r} is [old text, new text], got {edit!r}")
        count = text.count(edit[0])
        if count != 1:
            raise ValueError(f"edits[{index}] of fixture {fixture!r}: {edit[0]!r} occurs {count} times, not once")
        text = text.replace(edit[0], edit[1])
    return text


def render_header(members: Sequence[Sequence[Any]], abi_version: int, history: Mapping[int, Sequence[str]]) -> str:
    """A header in the spec header's format: "[vN]" member comments and "vN +member" history lines."""
    lines = []
    for version in sorted(history):
        added = " ".join(f"+{name}" for name in history[version])
        lines.append(f" *   v{version}  {added or 'entry points outside vllm_model_params'}\n")
    body = "".join(f"  /* [v{since}] member {name}. */\n  {ctype}{'' if ctype.endswith('*') else ' '}{name};\n"
                   for name, ctype, since in members)
    return _TEMPLATE.format(history="".join(lines), version=abi_version, members=body)


def render_port_header(members: Sequence[Sequence[Any]], abi_version: int, history: Mapping[int, Sequence[str]]) -> str:
    """A header in the C++ port's convention: an "(ABI vN)" heading opens each run of members of one version (a
    leading v1 run has none), and a prose version log, "vN: ...", names appended members as vllm_model_params.X."""
    lines = []
    for version in sorted(history):
        named = " / ".join(f"vllm_model_params.{name}" for name in history[version])
        lines.append(f" * v{version}: {named + ' appended' if named else 'entry points only; no struct changed'}.\n")
    body, previous = [], None
    for index, (name, ctype, since) in enumerate(members):
        if since != previous and not (index == 0 and since == 1):
            rule = "\u2500\u2500"
            body.append(f"  /* {rule} Run of v{since} members (ABI v{since}) {rule}\n   * member {name}. */\n")
        else:
            body.append(f"  /* member {name}. */\n")
        body.append(f"  {ctype}{'' if ctype.endswith('*') else ' '}{name};\n")
        previous = since
    return _TEMPLATE.format(history="".join(lines), version=abi_version, members="".join(body))


def _v16_history() -> dict[int, list[str]]:
    return {v: [n for n, _, s in V16_MEMBERS if s == v] for v in range(1, 17)}


def _with(members: list[tuple[str, str, int]], before: str | None, new: tuple[str, str, int]) -> list[tuple[str, str, int]]:
    """``members`` with ``new`` inserted before the member ``before`` (appended when None)."""
    if before is None:
        return [*members, new]
    at = [name for name, _, _ in members].index(before)
    return [*members[:at], new, *members[at:]]


def _variant(name: str) -> tuple[list[tuple[str, str, int]], int, dict[int, list[str]]]:
    members, history = list(V16_MEMBERS), _v16_history()
    if name == "v16":
        return members, 16, history
    if name == "v15":
        return [m for m in members if m[2] <= 15], 15, {v: ns for v, ns in history.items() if v <= 15}
    if name == "v17-appended":
        return _with(members, None, ("tensor_parallel_size", "int32_t", 17)), 17, {**history, 17: ["tensor_parallel_size"]}
    if name == "inserted-mid-struct":  # the port's offload_config, placed before enable_jump_forward
        return _with(members, "enable_jump_forward", ("offload_config", "const char *", 17)), 17, {**history, 17: ["offload_config"]}
    if name == "inserted-before-device":  # the port's disable_sliding_window
        return _with(members, "device", ("disable_sliding_window", "int32_t", 17)), 17, {**history, 17: ["disable_sliding_window"]}
    if name == "entry-point-bump":  # v17 changed entry points only: its history entry names no member
        return members, 17, {**history, 17: []}
    if name == "bump-without-history-entry":
        return members, 17, history
    if name == "member-without-bump":
        return _with(members, None, ("tensor_parallel_size", "int32_t", 17)), 16, {**history, 17: ["tensor_parallel_size"]}
    if name == "member-without-history-entry":
        return _with(members, None, ("tensor_parallel_size", "int32_t", 16)), 16, history
    raise KeyError(f"unknown header variant {name!r}; known: {sorted(VARIANTS)}")


VARIANTS = ("v16", "v15", "v17-appended", "inserted-mid-struct", "inserted-before-device", "entry-point-bump",
            "bump-without-history-entry", "member-without-bump", "member-without-history-entry")


def header_of(data: Mapping[str, Any]) -> str:
    """The header text a *header* input names."""
    if data.get("header") == "spec":
        return SPEC_HEADER.read_text(encoding="utf-8")
    if data.get("header") == "configured":
        return configured_header().read_text(encoding="utf-8")
    if "fixture" in data:
        return edited(fixture_text(data["fixture"]), data.get("edits", []), data["fixture"])
    if "variant" in data:
        return render_header(*_variant(data["variant"]))
    if "members" in data:
        history = {int(v): list(names) for v, names in data["history"].items()}
        style = data.get("style", "annotations")
        if style not in ("annotations", "headings"):
            raise ValueError(f"a header's style is 'annotations' or 'headings', got {style!r}")
        render = render_header if style == "annotations" else render_port_header
        return render([tuple(m) for m in data["members"]], int(data["abi_version"]), history)
    raise KeyError("a header input needs 'header: spec|configured', 'fixture', 'variant' or 'members', "
                   f"got {sorted(data)}")


def header_text(data: Mapping[str, Any]) -> Call:
    """Call(header text) for the history gate; the compiler is needed by its oracle."""
    require_compiler()
    return Call(args=(header_of(data),))


def no_arguments(data: Mapping[str, Any]) -> Call:
    """Call() for a zero-argument impl target (the mirror itself is the input)."""
    if data:
        raise ValueError(f"this gate's impl takes no input, got {dict(data)!r}")
    return Call()


def spec_header(data: Mapping[str, Any]) -> Call:
    """Call(path of the configured header, by default spec/include/vllm.h) for an oracle that compiles it."""
    require_compiler()
    if data and data != {"header": "spec"}:
        raise ValueError(f"this oracle reads the configured header only, got {dict(data)!r}")
    return Call(args=(str(configured_header()),))


def header_and_library(data: Mapping[str, Any]) -> Call:
    """Call(configured header path, library=configured library or None) for an oracle reading the library's
    defaults at the header's offsets (None: the stand-in built from the header)."""
    spec_header(data)
    return Call(args=(str(configured_header()),), kwargs={"library": configured_library_or_none()})


_FOREIGN = "int vllm_gates_unrelated(void) { return 0; }\n"


def _library_header(which: Any) -> str | None:
    """The header text a *library* input's library is built from (None for the foreign one)."""
    if which == "foreign":
        return None
    if which == "configured":
        return configured_header().read_text(encoding="utf-8")
    if which == "spec":
        return SPEC_HEADER.read_text(encoding="utf-8")
    if isinstance(which, Mapping):
        if set(which) != {"fixture"}:
            raise ValueError(f"a library given as a mapping is {{fixture: NAME}}, got {dict(which)!r}")
        return fixture_text(which["fixture"])
    return render_header(*_variant(which))


def library(data: Mapping[str, Any]) -> Call:
    """Call(path of a library, header text it was built from) for the handshake: ``{library: configured}`` is the
    configured library; the others are compiled (see the module docstring)."""
    require_compiler()
    which = data["library"]
    text = _library_header(which)
    if which == "foreign":
        return Call(args=(str(build("not_vllm", "", _FOREIGN, shared=True)),))
    if which == "configured":
        return Call(args=(str(configured_library()),), kwargs={"header_text": text})
    return Call(args=(str(handshake_library(text)),), kwargs={"header_text": text})  # type: ignore[arg-type]


def library_header(data: Mapping[str, Any]) -> Call:
    """Call(path of the header a *library* input's library is built from) for the version it must report."""
    require_compiler()
    which = data["library"]
    if which == "configured":
        return Call(args=(str(configured_header()),))
    if which == "spec":
        return Call(args=(str(SPEC_HEADER),))
    if isinstance(which, Mapping):
        fixture_text(which.get("fixture"))
        return Call(args=(str(FIXTURES / which["fixture"]),))
    raise ValueError(f"the version oracle reads the header of a spec, configured or fixture library, got {which!r}")


def probe_config(data: Mapping[str, Any]) -> kv.KVCacheConfig:
    """A KV probe of one full-attention group of ``layers`` layers."""
    spec = kv.FullAttentionSpec(block_size=data["block_size"], num_kv_heads=data["num_kv_heads"],
                                head_size=data["head_size"], dtype=DTYPES[data["dtype"]])
    group = kv.KVCacheGroupSpec(tuple(f"layer{i}" for i in range(data["layers"])), spec)
    return kv.KVCacheConfig(num_blocks=0, kv_cache_tensors=(), kv_cache_groups=(group,))


def probe_bytes_per_block(data: Mapping[str, Any]) -> int:
    """K and V pages of every layer: 2 * block_size * heads * head_size * dtype size * layers."""
    size = torch.empty((), dtype=DTYPES[data["dtype"]]).element_size()
    return 2 * data["block_size"] * data["num_kv_heads"] * data["head_size"] * size * data["layers"]


def _raw(value: Any) -> Any:
    """A member value as C holds it: text -> UTF-8 bytes, a list of ints -> those bytes."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, list):
        return bytes(value)
    return value


def raw_members(members: Mapping[str, Any]) -> dict[str, Any]:
    """Every member's raw value: the given ones, and zero (or NULL) for the rest."""
    names = [name for name, _, _ in MEMBERS]
    unknown = sorted(set(members) - set(names))
    if unknown:
        raise KeyError(f"vllm_model_params has no member {unknown}")
    return {name: _raw(members[name]) if name in members else None if ctype is ctypes.c_char_p else 0
            for name, ctype, _ in MEMBERS}


def struct_of(members: Mapping[str, Any]) -> ModelParams:
    """A ``ModelParams`` holding ``members`` (others zero); strings stay alive with the struct."""
    return ModelParams(**raw_members(members))


def load_call(data: Mapping[str, Any]) -> Call:
    """Call(struct, probe) for the status gate's impl."""
    return Call(args=(struct_of(data.get("members", {})), probe_config(data.get("probe", DEFAULT_PROBE))))


def check_call(data: Mapping[str, Any]) -> Call:
    """Call(configured header path, raw members, bytes per block) for the compiled C checks."""
    require_compiler()
    probe = data.get("probe", DEFAULT_PROBE)
    return Call(args=(str(configured_header()), raw_members(data.get("members", {})), probe_bytes_per_block(probe)))


def _text_field(value: Any) -> Any:
    """A field value as given, or ``{code_points: [ints]}`` made into the str of those code points: how a case
    names text that plain case data cannot carry (a lone surrogate such as U+D800 is no valid Unicode string)."""
    if isinstance(value, Mapping):
        if set(value) != {"code_points"} or not all(type(c) is int for c in value["code_points"]):
            raise ValueError(f"a text field given as a mapping must be {{code_points: [ints]}}, got {dict(value)!r}")
        return "".join(chr(c) for c in value["code_points"])
    return value


def engine_params(data: Mapping[str, Any]) -> Call:
    """Call(EngineParams(**data)) for the round trip; an absent utilization is the default. A string field may be
    given as ``{code_points: [...]}`` (see :func:`_text_field`)."""
    require_compiler()
    return Call(args=(EngineParams(**{name: _text_field(value) for name, value in data.items()}),))


def v15_struct(data: Mapping[str, Any]) -> Call:
    """Call(v15 member values, probe) for the zero-struct gate's impl; the v16 members are left zero."""
    v15 = dict(data.get("v15", {}))
    late = sorted(name for name in v15 if name in ("gpu_memory_utilization", "kv_cache_memory_bytes"))
    if late:
        raise ValueError(f"the zero-struct gate sets v15 members only, got {late}")
    return Call(args=(v15, probe_config(data.get("probe", DEFAULT_PROBE))))


def v15_num_blocks(data: Mapping[str, Any]) -> Call:
    """Call(num_blocks) for the v15 pool model."""
    return Call(args=(data.get("v15", {}).get("num_blocks", 0),))


def argv(data: Mapping[str, Any]) -> Call:
    """Call(list of command-line words)."""
    return Call(args=(list(data["argv"]),))



def header_and_member(data: Mapping[str, Any]) -> Call:
    """Call(configured header path, member=..., value=...) for the oracle that reads the member's width."""
    spec_header({})
    return Call(args=(str(configured_header()),), kwargs=dict(data))
