"""Known-bad implementations the CAPI-ABI gates must reject, each with its gate's impl signature.

Bad mirrors replay the C++ port's history (a member inserted mid-struct, a narrower type, a bump
without a member); bad readers replay what a C caller can get wrong (0.0 read literally, a byte budget
below one block reported as MODEL_LOAD, a flag parsed with strtoll).
"""
from __future__ import annotations

import ctypes
import re
from dataclasses import replace
from typing import Any

from impl.capi import history as good_history
from impl.capi.header_reader import version_log_entries
from impl.capi.abi import FIELD_SINCE, MEMBERS, ModelParams, VllmStatus
from impl.capi.convert import MAPPINGS, MEMBER_NAMES, MemberMapping, engine_params_from_c, engine_params_from_values
from impl.capi.defaults import model_params_default
from impl.capi.errors import AbiHistoryError, AbiVersionMismatch, CapiError, InvalidArgument
from impl.capi.layout import struct_layout
from impl.capi.library import checked_abi_version, open_library
from impl.capi.load import LoadResult, engine_load
from impl.entrypoints import example_cli
from impl.entrypoints.model_loader import DEFAULT_GPU_MEMORY_UTILIZATION, EngineParams
from impl.v1.kv_cache_interface import KVCacheConfig, kv_bytes_per_block

from .subjects import (default_returned_by_value, describe, load_verdict, member_values, member_written,
                       pool_from_members, through_c, verdict)


def _mirror(label: str, *, retype: dict[str, type] | None = None,
            insert: tuple[str | None, str, type, int] | None = None) -> tuple[type[ctypes.Structure], dict[str, int]]:
    """A ModelParams look-alike with members retyped, or one member inserted before ``insert[0]`` (None: appended)."""
    members = [(name, (retype or {}).get(name, ctype), since) for name, ctype, since in MEMBERS]
    if insert is not None:
        before, name, ctype, since = insert
        at = len(members) if before is None else [m[0] for m in members].index(before)
        members.insert(at, (name, ctype, since))
    struct = type(label, (ctypes.Structure,), {"_fields_": [(n, t) for n, t, _ in members]})
    return struct, {n: s for n, _, s in members}


MID_STRUCT, MID_STRUCT_SINCE = _mirror("OffloadConfigMidStruct", insert=("enable_jump_forward", "offload_config",
                                                                          ctypes.c_char_p, 17))
FLOAT_UTILIZATION, _ = _mirror("FloatUtilization", retype={"gpu_memory_utilization": ctypes.c_float})
INT32_BUDGET, _ = _mirror("Int32Budget", retype={"kv_cache_memory_bytes": ctypes.c_int32})
APPENDED_NO_BUMP, APPENDED_NO_BUMP_SINCE = _mirror("AppendedWithoutBump",
                                                   insert=(None, "tensor_parallel_size", ctypes.c_int32, 16))


# --- layout gate: impl.capi.layout:model_params_layout() ---------------------------------------------------

def layout_field_inserted_mid_struct() -> dict[str, object]:
    """The port's later offload_config, placed before enable_jump_forward: every later offset moves."""
    return struct_layout(MID_STRUCT, MID_STRUCT_SINCE)


def layout_float_utilization() -> dict[str, object]:
    """gpu_memory_utilization as a float: same sizeof and offsets, wrong type and size."""
    return struct_layout(FLOAT_UTILIZATION, FIELD_SINCE)


def layout_int32_byte_budget() -> dict[str, object]:
    """kv_cache_memory_bytes as an int32_t: same sizeof (padding), truncates 4 GiB."""
    return struct_layout(INT32_BUDGET, FIELD_SINCE)


def layout_field_without_bump() -> dict[str, object]:
    """A member appended under the v16 label, with no version bump."""
    return struct_layout(APPENDED_NO_BUMP, APPENDED_NO_BUMP_SINCE)


# --- member-write gate: .subjects:member_written(member, value) --------------------------------------------

def member_write_wraps(member: str, value: int) -> int:
    """Plain ctypes: an int past the member's C type is stored modulo 2**bits (2**32 + 5 reads back as 5)."""
    params = ModelParams()
    ctypes.Structure.__setattr__(params, member, value)
    return getattr(params, member)


def member_write_int32_everywhere(member: str, value: int) -> int:
    """Every integer member checked against the int32_t range: the int64_t budget refuses 4 GiB."""
    if not -2**31 <= value <= 2**31 - 1:
        raise OverflowError(f"vllm_model_params.{member} is an int32_t: {value} does not fit")
    return member_written(member, value)


def member_write_greatest_refused(member: str, value: int) -> int:
    """An off-by-one upper bound (``value < 2**(bits-1) - 1``): the greatest value the C type holds is refused."""
    ctype = dict((name, c) for name, c, _ in MEMBERS)[member]
    if value == (1 << (8 * ctypes.sizeof(ctype) - 1)) - 1:
        raise OverflowError(f"vllm_model_params.{member}: {value} does not fit")
    return member_written(member, value)


# --- status-codes gate: impl.capi.layout:status_codes() -----------------------------------------------------

def status_load_and_runtime_swapped() -> list[list[object]]:
    """MODEL_LOAD and RUNTIME numbered the other way round: a C caller reads a load failure as a runtime one."""
    swapped = {"VLLM_ERR_MODEL_LOAD": 3, "VLLM_ERR_RUNTIME": 2}
    return [[status.name, swapped.get(status.name, int(status))] for status in VllmStatus]


def status_unknown_minus_one() -> list[list[object]]:
    """The catch-all status as -1, as many C libraries number it, where the header says 4."""
    return [[status.name, -1 if status.name == "VLLM_ERR_UNKNOWN" else int(status)] for status in VllmStatus]


# --- history gate: impl.capi.history:header_history(header_text) ------------------------------------------

def history_sorted_by_version(header_text: str) -> dict[str, object]:
    """Sorts members by version before checking, so a member inserted mid-struct looks appended."""
    facts = good_history.read_header(header_text)
    return good_history.check_history(replace(facts, members=tuple(sorted(facts.members, key=lambda m: m.since))))


def history_trusts_the_macro(header_text: str) -> dict[str, object]:
    """Checks the member order, then lists versions 1..VLLM_ABI_VERSION without asking whether the
    newest member's version is past the macro (a member past it is silently left out)."""
    facts = good_history.read_header(header_text)
    good_history.check_order(facts.members)
    return good_history.versions(facts.members, facts.abi_version)


def history_skips_entries(header_text: str) -> dict[str, object]:
    """Checks order and bumps but never compares the annotations with the history entries."""
    facts = good_history.read_header(header_text)
    good_history.check_order(facts.members)
    good_history.check_bumps(facts.members, facts.abi_version, facts.log)
    return good_history.versions(facts.members, facts.abi_version)


def history_reads_annotations_only(header_text: str) -> dict[str, object]:
    """The reader before issue 12: only "[vN]" annotations, so the port's own header fails on parsing."""
    facts = good_history.read_header(header_text)
    if facts.convention != good_history.ANNOTATIONS:
        raise AbiHistoryError(f"member {facts.members[0].name!r} has no '[vN]' annotation opening its comment")
    return good_history.check_history(facts)


def history_bump_needs_a_member(header_text: str) -> dict[str, object]:
    """The rule before issue 12, "VLLM_ABI_VERSION is the newest member's version": refuses the port's v17 and v18,
    bumped for entry points only."""
    facts = good_history.read_header(header_text)
    result = good_history.check_history(facts)
    newest = max(m.since for m in facts.members)
    if newest != facts.abi_version:
        raise AbiHistoryError(f"VLLM_ABI_VERSION is {facts.abi_version} but the newest member is from v{newest}: "
                              "a version bump needs a new member")
    return result


def history_any_bump_accepted(header_text: str) -> dict[str, object]:
    """Takes every version without a member for an entry-point bump, whether or not the history has its entry."""
    facts = good_history.read_header(header_text)
    filled = {**{v: () for v in range(1, facts.abi_version + 1)}, **facts.log}
    return good_history.check_history(replace(facts, log=filled))


def history_ignores_log_names(header_text: str) -> dict[str, object]:
    """Reads the port's version log for its entries only, never for the members they name, so a member without its
    own heading (read as part of the run before it) goes unseen."""
    facts = good_history.read_header(header_text)
    if facts.convention == good_history.HEADINGS:
        facts = replace(facts, log={version: () for version in facts.log})
    return good_history.check_history(facts)


_PORT_STRUCT = re.compile(r"typedef\s+struct\s+vllm_model_params\s*\{.*?\}\s*vllm_model_params\s*;", re.S)


def history_every_version_remark_is_a_log_entry(header_text: str) -> dict[str, object]:
    """The port-log rule before issue 26: any comment outside vllm_model_params with a line opening "vN:" or "vN —"
    is a log entry, so a "v18:" remark on another struct's member or on an entry point makes a second v18 entry (the
    port's own header is refused), and a remark stands in for a missing entry."""
    facts = good_history.read_header(header_text)
    if facts.convention == good_history.HEADINGS:
        comments = [c.splitlines() for c in re.findall(r"/\*(.*?)\*/", _PORT_STRUCT.sub(" ", header_text), re.S)]
        facts = replace(facts, log=version_log_entries(comments))
    return good_history.check_history(facts)


def history_insertion_without_offsets(header_text: str) -> dict[str, object]:
    """Refuses a member inserted mid-struct without saying which offsets it moved."""
    try:
        return good_history.header_history(header_text)
    except AbiHistoryError as err:
        raise AbiHistoryError(str(err).split("; offsets")[0].split("; no v")[0]) from None


# --- defaults gate: gates.rows.capi_abi.subjects:model_params_default_members() ---------------------------

def default_num_blocks_256() -> dict[str, Any]:
    """The pre-v16 default pool of 256 blocks."""
    params = model_params_default()
    params.num_blocks = 256
    return member_values(params)


def default_max_num_seqs_8() -> dict[str, Any]:
    """What the port's header comment still said ("<= 0 => 8") instead of the engine's 32."""
    params = model_params_default()
    params.max_num_seqs = 8
    return member_values(params)


def default_utilization_zero() -> dict[str, Any]:
    """0.0 in the default struct: reads the same, but is not what vllm_model_params_default() returns."""
    params = model_params_default()
    params.gpu_memory_utilization = 0.0
    return member_values(params)


# --- default-by-value gate: gates.rows.capi_abi.subjects:c_default_through_mirror() --------------------------------

def by_value_into_float_mirror() -> dict[str, Any]:
    """The C default received into a mirror whose utilization is a float."""
    return member_values(default_returned_by_value(FLOAT_UTILIZATION))


def by_value_into_mid_struct_mirror() -> dict[str, Any]:
    """The C default received into a mirror with a member inserted mid-struct."""
    return member_values(default_returned_by_value(MID_STRUCT))


# --- bad readers shared by the round-trip, zero-struct and status gates ----------------------------------

def _swap(name: str, from_c: Any) -> tuple[MemberMapping, ...]:
    return tuple(replace(m, from_c=from_c) if m.name == name else m for m in MAPPINGS)


def _literal_utilization(name: str, raw: float) -> float:
    return raw


def _zero_is_chosen_default(name: str, raw: float) -> float:
    return float(DEFAULT_GPU_MEMORY_UTILIZATION) if raw == 0.0 else raw


def _latin1(name: str, raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("latin-1")


LITERAL_ZERO = _swap("gpu_memory_utilization", _literal_utilization)
ZERO_IS_CHOSEN = _swap("gpu_memory_utilization", _zero_is_chosen_default)
LATIN1 = tuple(replace(m, from_c=_latin1) if m.name in ("model_path", "tool_parser") else m for m in MAPPINGS)


# --- round-trip gate: gates.rows.capi_abi.subjects:round_trip(params) -----------------------------------------------

def round_trip_float_utilization(params: EngineParams) -> dict[str, Any]:
    """Through a mirror whose utilization is a float."""
    return describe(through_c(params, FLOAT_UTILIZATION))


def round_trip_int32_byte_budget(params: EngineParams) -> dict[str, Any]:
    """Through a mirror whose byte budget is an int32_t (ctypes wraps 4 GiB to 0 without a word)."""
    return describe(through_c(params, INT32_BUDGET))


def round_trip_field_inserted_mid_struct(params: EngineParams) -> dict[str, Any]:
    """Through a mirror with offload_config inserted before enable_jump_forward."""
    return describe(through_c(params, MID_STRUCT))


def round_trip_zero_utilization_literal(params: EngineParams) -> dict[str, Any]:
    """Reads utilization 0.0 as 0.0 instead of the default."""
    return describe(through_c(params, mappings=LITERAL_ZERO))


def round_trip_strings_as_latin1(params: EngineParams) -> dict[str, Any]:
    """Writes UTF-8 but reads model_path and tool_parser back as Latin-1."""
    return describe(through_c(params, mappings=LATIN1))


# --- zero-struct gate: gates.rows.capi_abi.subjects:pool_from_v16_struct(v15, probe) --------------------------------

def pool_zero_utilization_literal(v15: dict[str, Any], probe: KVCacheConfig) -> dict[str, Any]:
    """Utilization 0.0 taken literally: an all-zero struct no longer loads."""
    return pool_from_members(v15, probe, lambda values: engine_params_from_values(values, LITERAL_ZERO))


def pool_zero_utilization_explicit(v15: dict[str, Any], probe: KVCacheConfig) -> dict[str, Any]:
    """Utilization 0.0 read as a chosen 0.92: the zero struct now warns that the utilization was ignored."""
    return pool_from_members(v15, probe, lambda values: engine_params_from_values(values, ZERO_IS_CHOSEN))


# --- status gate: gates.rows.capi_abi.subjects:load_verdict(params, probe) ------------------------------------------

def load_sub_block_budget_model_load(params: ModelParams, probe: KVCacheConfig) -> dict[str, Any]:
    """The C++ port: an error raised while sizing the pool (after the members read fine) is MODEL_LOAD."""
    result = engine_load(params, probe)
    if result.status is VllmStatus.VLLM_ERR_INVALID_ARGUMENT:
        try:
            engine_params_from_c(params)
        except CapiError:
            return verdict(result)
        result = replace(result, status=VllmStatus.VLLM_ERR_MODEL_LOAD)
    return verdict(result)


def _read_then_load(params: ModelParams, probe: KVCacheConfig, mappings: tuple[MemberMapping, ...]) -> dict[str, Any]:
    try:
        engine = engine_params_from_values({name: getattr(params, name) for name in MEMBER_NAMES}, mappings)
    except CapiError as err:
        return verdict(LoadResult(err.status, str(err)))
    good = ModelParams(**{name: getattr(params, name) for name in MEMBER_NAMES})
    good.gpu_memory_utilization = 0.0 if not engine.gpu_memory_utilization_is_explicit else engine.gpu_memory_utilization
    good.kv_cache_memory_bytes = engine.kv_cache_memory_bytes
    return load_verdict(good, probe)


def _clamped(name: str, raw: float) -> float:
    return DEFAULT_GPU_MEMORY_UTILIZATION if raw == 0.0 or raw != raw else min(max(raw, 1e-9), 1.0)


def _negative_is_unset(name: str, raw: int) -> int:
    return max(raw, 0)


def _nan_slips_through(name: str, raw: float) -> float:
    if raw < 0.0 or raw > 1.0:
        raise InvalidArgument(f"vllm_model_params.{name} must be in [0, 1], got {raw!r}", field=name)
    return DEFAULT_GPU_MEMORY_UTILIZATION if raw == 0.0 else raw


def load_utilization_clamped(params: ModelParams, probe: KVCacheConfig) -> dict[str, Any]:
    """Out-of-range utilization clamped into (0, 1] (and NaN defaulted) instead of refused."""
    return _read_then_load(params, probe, _swap("gpu_memory_utilization", _clamped))


def load_negative_budget_unset(params: ModelParams, probe: KVCacheConfig) -> dict[str, Any]:
    """A negative byte budget read as 0 (unset) instead of refused."""
    return _read_then_load(params, probe, _swap("kv_cache_memory_bytes", _negative_is_unset))


def load_nan_utilization_unnamed(params: ModelParams, probe: KVCacheConfig) -> dict[str, Any]:
    """Range-checks with < and >, which NaN passes; the later refusal no longer names the member."""
    return _read_then_load(params, probe, _swap("gpu_memory_utilization", _nan_slips_through))


_RENUMBERED_STATUS: dict[str, int] = {"VLLM_OK": 0, "VLLM_ERR_MODEL_LOAD": 1, "VLLM_ERR_INVALID_ARGUMENT": 2,
                                      "VLLM_ERR_RUNTIME": 3, "VLLM_ERR_UNKNOWN": 4}
"""A binding that numbered MODEL_LOAD before INVALID_ARGUMENT (status name -> its wrong code, a plain int)."""


def load_block_count_wrapped(params: ModelParams, probe: KVCacheConfig) -> dict[str, Any]:
    """A block count above INT32_MAX stored into the int32_t num_blocks as C would: wrapped, not refused."""
    result = engine_load(params, probe)
    if result.status is VllmStatus.VLLM_ERR_INVALID_ARGUMENT and "an engine counts" in (result.error or ""):
        engine = engine_params_from_c(params)
        blocks = engine.kv_cache_memory_bytes // kv_bytes_per_block(probe)
        result = LoadResult(VllmStatus.VLLM_OK, None, engine, ctypes.c_int32(blocks).value)
    return verdict(result)


def load_status_renumbered(params: ModelParams, probe: KVCacheConfig) -> dict[str, Any]:
    """Right status names, wrong numbers: a C caller comparing codes reads INVALID_ARGUMENT as MODEL_LOAD."""
    result = load_verdict(params, probe)
    return {**result, "code": _RENUMBERED_STATUS[result["status"]]}


def load_message_without_member(params: ModelParams, probe: KVCacheConfig) -> dict[str, Any]:
    """Right statuses, but messages that do not say which member is wrong."""
    result = engine_load(params, probe)
    if result.error is not None:
        result = replace(result, error=re.sub(r"vllm_model_params\.\w+", "an argument", result.error))
    return verdict(result)


# --- version gate: impl.capi.library:checked_abi_version(library_path, header_text) ------------------------

def version_bump_without_member(library_path: str, header_text: str | None = None) -> int:
    """A binding bumped to v17 without a new member: it refuses the v16 library it mirrors."""
    return open_library(library_path, expected_version=17, header_text=header_text).abi_version


def version_unchecked(library_path: str, header_text: str | None = None) -> int:
    """Loads any library and reports its version without comparing it with the mirror's."""
    function = ctypes.CDLL(str(library_path)).vllm_abi_version
    function.restype = ctypes.c_int32
    return int(function())


def version_claims_layouts_differ(library_path: str, header_text: str | None = None) -> int:
    """The refusal before issue 12: every other version is said to have another struct layout, even v18, whose
    vllm_model_params is v16's."""
    try:
        return checked_abi_version(library_path)
    except AbiVersionMismatch as err:
        if "exports no vllm_abi_version" in str(err):
            raise
        reported = version_unchecked(library_path)
        raise AbiVersionMismatch(f"{library_path} was built for vllm C ABI v{reported} but this binding mirrors v16 "
                                 "(spec/include/vllm.h); the struct layouts differ, so it is refused.") from None


# --- CLI gate: gates.rows.capi_abi.subjects:engine_params_via_c(argv) --------------------------------------

def cli_writes_default_utilization(argv: list[str]) -> dict[str, Any]:
    """The older example CLI: no flag writes 0.92 into the struct, so the engine sees a chosen utilization."""
    args = example_cli.build_parser().parse_args(list(argv))
    params = example_cli.model_params_from_args(args)
    if args.gpu_memory_utilization is None:
        params.gpu_memory_utilization = 0.92
    return describe(engine_params_from_c(params))


def _strtoll(text: str) -> str:
    match = re.match(r"\s*([+-]?\d+)", text)
    return match.group(1) if match else "0"


def cli_strtoll_kv_memory(argv: list[str]) -> dict[str, Any]:
    """The C example's strtoll: "4GiB" reads as 4 bytes and "abc" as 0 (unset)."""
    words = list(argv)
    for i, word in enumerate(words[:-1]):
        if word in ("--kv-cache-memory", "--kv-cache-memory-bytes"):
            words[i + 1] = _strtoll(words[i + 1])
    return describe(example_cli.engine_params_via_c(words))


def cli_zero_utilization_means_default(argv: list[str]) -> dict[str, Any]:
    """atof("0") written as is: --gpu-memory-utilization 0 silently becomes the default."""
    args = example_cli.build_parser().parse_args(list(argv))
    if args.gpu_memory_utilization == 0.0:
        args.gpu_memory_utilization = None
    return describe(engine_params_from_c(example_cli.model_params_from_args(args)))



def _example_cli_output(argv: list[str], *, name_twice: bool, struct_utilization_from_engine: bool) -> dict[str, Any]:
    """example-cli run as a command with one of two defects users see (CAPI-10.3)."""
    import io
    import json

    try:
        params = example_cli.model_params_from_args(example_cli.build_parser().parse_args(list(argv)))
        engine = engine_params_from_c(params)
    except (ValueError, TypeError) as err:
        message = str(err) if name_twice else str(err).removeprefix("example-cli: ")
        return {"exit": 2, "stdout": "", "stderr": f"example-cli: error: {message}\n"}
    shown = member_values(params)
    if struct_utilization_from_engine:
        shown["gpu_memory_utilization"] = float(engine.gpu_memory_utilization)
    report = {"vllm_model_params": shown,
              "engine_params": {name: getattr(engine, name) for name, _, _ in MEMBERS},
              "gpu_memory_utilization_is_explicit": engine.gpu_memory_utilization_is_explicit}
    out = io.StringIO()
    print(json.dumps(report, indent=2), file=out)
    return {"exit": 0, "stdout": out.getvalue(), "stderr": ""}


def example_cli_program_name_twice(argv: list[str]) -> dict[str, Any]:
    """A usage error printed as 'example-cli: error: example-cli: ...', the name said twice (CAPI-10.3)."""
    return _example_cli_output(argv, name_twice=True, struct_utilization_from_engine=False)


def example_cli_struct_shows_engine_utilization(argv: list[str]) -> dict[str, Any]:
    """The struct's utilization shown as the engine reads it (0.92), hiding the 0.0 a C caller wrote (CAPI-10.3)."""
    return _example_cli_output(argv, name_twice=False, struct_utilization_from_engine=True)
