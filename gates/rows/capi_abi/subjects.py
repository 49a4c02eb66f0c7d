"""Subjects of the CAPI-ABI gates: impl.capi run through the compiled C oracles, giving plain results.

Each public function is a gate's ``impl`` (or ``oracle``) target and answers with plain data only (None, bool,
int, float, str, lists and dicts of them): an ``EngineParams`` is seen through :func:`describe`, a ctypes struct
through :func:`member_values`. The helpers taking a struct class or member mappings (and returning impl objects)
let ``known_bad.py`` run the same path with one wrong piece. Comparisons live in ``compare.py``, which takes the
plain views and imports nothing from here.
"""
from __future__ import annotations

import contextlib
import ctypes
import io
import re
import warnings
from dataclasses import fields
from typing import Any, Callable, Mapping, Sequence

from impl.capi import model_params_default, model_params_from_engine
from impl.capi.abi import INT_MEMBER_RANGES, ModelParams
from impl.capi.convert import MAPPINGS, MEMBER_NAMES, MemberMapping, c_values_from_engine, engine_params_from_values
from impl.capi.library import open_library
from impl.capi.load import LoadResult, engine_load
from impl.entrypoints.cli_args import engine_params_from_args
from impl.entrypoints import example_cli
from impl.entrypoints.example_cli import build_parser
from impl.entrypoints.model_loader import EngineParams, resolve_num_blocks
from impl.v1.kv_cache_interface import KVCacheConfig
from oracles.abi.library import load

from .build import configured_header, configured_library


_NAMED_MEMBER = re.compile(r"vllm_model_params\.([A-Za-z_]\w*)")


def example_cli_run(argv: list[str]) -> dict[str, Any]:
    """``example-cli ARGV`` run as a command: its exit status and what it writes (CAPI-10.3)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = example_cli.main(list(argv))
    return {"exit": status, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()}


def describe(params: EngineParams) -> dict[str, Any]:
    """Every field of ``params`` plus whether the utilization was chosen (``==`` alone cannot tell), as plain
    values: the utilization's ``DefaultUtilization`` marker (a float subclass) becomes a plain ``float``."""
    view = {f.name: getattr(params, f.name) for f in fields(params)}
    view["gpu_memory_utilization"] = float(params.gpu_memory_utilization)
    view["gpu_memory_utilization_is_explicit"] = params.gpu_memory_utilization_is_explicit
    return view


def member_values(struct: ctypes.Structure) -> dict[str, Any]:
    """A ctypes struct's members in declaration order as plain values (``char *`` decoded as UTF-8)."""
    if not isinstance(struct, ctypes.Structure):
        raise TypeError(f"expected a ctypes struct, got {type(struct).__name__}")
    values = {name: getattr(struct, name) for name, _ in struct._fields_}
    return {k: v.decode("utf-8") if isinstance(v, bytes) else v for k, v in values.items()}


def through_c(params: EngineParams, struct: type[ctypes.Structure] = ModelParams,
              mappings: tuple[MemberMapping, ...] = MAPPINGS) -> EngineParams:
    """``params`` written into ``struct``, copied member by member by the compiled C library, read back."""
    library = load(configured_header().read_text(encoding="utf-8"))
    if struct is ModelParams and mappings is MAPPINGS:  # the binding's own inverse (CAPI-5.9)
        written = model_params_from_engine(params)
    else:
        written = struct(**c_values_from_engine(params, mappings))
    size = ctypes.sizeof(struct)
    with library.copied(ctypes.string_at(ctypes.addressof(written), size)) as copied:
        back = struct.from_buffer_copy(copied.ljust(size, b"\0")[:size])
        return engine_params_from_values({name: getattr(back, name) for name in MEMBER_NAMES}, mappings)


def default_returned_by_value(struct: type[ctypes.Structure] = ModelParams) -> ctypes.Structure:
    """``vllm_model_params_default()`` of the configured library (by default the stand-in built from the configured
    header), returned by value into ``struct``; the library's version is checked first."""
    library = open_library(configured_library(), header_text=configured_header().read_text(encoding="utf-8"))
    if struct is ModelParams:
        return library.model_params_default()
    function = library.handle.vllm_model_params_default
    function.argtypes, function.restype = [], struct
    return function()


def model_params_default_members() -> dict[str, Any]:
    """Gate target of defaults: the mirror's ``model_params_default()`` seen through :func:`member_values`."""
    return member_values(model_params_default())


def c_default_through_mirror() -> dict[str, Any]:
    """The C default as a Python caller receives it: by value, into ``ModelParams``; its :func:`member_values`."""
    return member_values(default_returned_by_value())


def round_trip(params: EngineParams) -> dict[str, Any]:
    """EngineParams -> vllm_model_params -> compiled C copy (the stand-in built from the configured header) ->
    vllm_model_params -> EngineParams, described."""
    return describe(through_c(params))


def unchanged(params: EngineParams) -> dict[str, Any]:
    """What a round trip must give back: the params themselves, described."""
    return describe(params)


def pool_from_members(v15: Mapping[str, Any], probe: KVCacheConfig,
                      read: Callable[[Mapping[str, Any]], EngineParams] = engine_params_from_values) -> dict[str, Any]:
    """The pool and the warnings of a v16 struct holding the v15 members ``v15`` and zero v16 members."""
    struct = ModelParams(**{name: (value.encode("utf-8") if isinstance(value, str) else value)
                            for name, value in v15.items()})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        blocks = resolve_num_blocks(read({name: getattr(struct, name) for name in MEMBER_NAMES}), probe)
    return {"num_blocks": blocks, "warnings": [type(w.message).__name__ for w in caught]}


def pool_from_v16_struct(v15: Mapping[str, Any], probe: KVCacheConfig) -> dict[str, Any]:
    """:func:`pool_from_members` with the mirror's reading of the struct."""
    return pool_from_members(v15, probe)


def verdict(result: LoadResult) -> dict[str, Any]:
    """Status name and code, the member the message names (``vllm_model_params.<member>``), the block
    count, and on success what the engine read from each member (with whether the utilization was chosen)."""
    named = _NAMED_MEMBER.search(result.error or "")
    read = None
    if result.engine_params is not None:
        view = describe(result.engine_params)
        read = {name: view[name] for name in (*MEMBER_NAMES, "gpu_memory_utilization_is_explicit")}
    return {"status": result.status.name, "code": int(result.status), "field": named.group(1) if named else None,
            "num_blocks": result.num_blocks, "read": read}


def load_verdict(params: ModelParams, probe: KVCacheConfig) -> dict[str, Any]:
    """:func:`verdict` of ``engine_load`` without a memory profile."""
    return verdict(engine_load(params, probe))


def engine_params_via_c(argv: Sequence[str]) -> dict[str, Any]:
    """Gate target of cli-flags: ``example_cli.engine_params_via_c`` (flags -> vllm_model_params -> EngineParams),
    described."""
    return describe(example_cli.engine_params_via_c(argv))


def engine_params_via_python(argv: Sequence[str]) -> dict[str, Any]:
    """The Python front door: the kv-plan flag code, then ``engine_params_from_args``; described."""
    return describe(engine_params_from_args(build_parser().parse_args(list(argv))))



def member_written(member: str, value: int) -> int:
    """``value`` assigned to ``member`` of a fresh ModelParams, read back: the binding refuses an int its C type
    cannot hold rather than wrap it (CAPI-5.9)."""
    if member not in INT_MEMBER_RANGES:  # ctypes would add any other name as a plain attribute and read it back
        raise ValueError(f"vllm_model_params has no int32_t or int64_t member {member!r} "
                         f"(its integer members: {', '.join(INT_MEMBER_RANGES)})")
    params = ModelParams()
    setattr(params, member, value)
    return getattr(params, member)
