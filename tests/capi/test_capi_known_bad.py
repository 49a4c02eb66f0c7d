"""Each CAPI-ABI known-bad differs from the correct target on a named input (the gate file lists the same)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gates.rows.capi_abi import subjects as adapters
from gates.rows.capi_abi import build as inputs
from gates.rows.capi_abi import known_bad as bad
from tests.capi.conftest import gate_case_input
from impl.capi.history import header_history
from impl.capi.layout import model_params_layout, status_codes
from impl.capi.library import checked_abi_version
from vllm_gates import Call

pytestmark = pytest.mark.cpu
GATE_FILE = Path(inputs.ROOT, "gates", "rows", "capi_abi", "gate.yaml")


_PLAIN_SCALARS = (type(None), bool, int, float, str)


def is_plain(value) -> bool:
    """Exactly the data a worker process may answer with: None, bool, int, float, str, list, tuple, dict, nested
    (no subclasses: an IntEnum, a float marker or a ctypes struct is not plain)."""
    if type(value) in _PLAIN_SCALARS:
        return True
    if type(value) in (list, tuple):
        return all(is_plain(v) for v in value)
    if type(value) is dict:
        return all((type(k) in _PLAIN_SCALARS or type(k) is tuple and is_plain(k)) and is_plain(v)
                   for k, v in value.items())
    return False


def _outcome(target, call):
    try:
        value = call.apply(target)
    except Exception as exc:  # the exception is the outcome being compared
        return ("raised", type(exc).__name__)
    assert is_plain(value), f"{target.__qualname__} answered {type(value).__name__}, not plain data"
    return value


def _as_keywords(data):
    """The engine's default binding for a gate without an impl builder: the case input as keywords."""
    return Call(kwargs=dict(data))


# known-bad -> (correct target, builder, an input that tells them apart)
DISCRIMINATING = {
    bad.status_load_and_runtime_swapped: (status_codes, inputs.no_arguments, {}),
    bad.status_unknown_minus_one: (status_codes, inputs.no_arguments, {}),
    bad.member_write_wraps: (adapters.member_written, _as_keywords, {"member": "device", "value": 2**32 + 5}),
    bad.member_write_int32_everywhere: (adapters.member_written, _as_keywords,
                                        {"member": "kv_cache_memory_bytes", "value": 2**32}),
    bad.member_write_greatest_refused: (adapters.member_written, _as_keywords, {"member": "num_blocks", "value": 2**31 - 1}),
    bad.layout_field_inserted_mid_struct: (model_params_layout, inputs.no_arguments, {}),
    bad.layout_float_utilization: (model_params_layout, inputs.no_arguments, {}),
    bad.layout_int32_byte_budget: (model_params_layout, inputs.no_arguments, {}),
    bad.layout_field_without_bump: (model_params_layout, inputs.no_arguments, {}),
    bad.history_sorted_by_version: (header_history, inputs.header_text, {"variant": "inserted-mid-struct"}),
    bad.history_trusts_the_macro: (header_history, inputs.header_text, {"variant": "member-without-bump"}),
    bad.history_skips_entries: (header_history, inputs.header_text, {"variant": "member-without-history-entry"}),
    bad.default_num_blocks_256: (adapters.model_params_default_members, inputs.no_arguments, {}),
    bad.default_max_num_seqs_8: (adapters.model_params_default_members, inputs.no_arguments, {}),
    bad.default_utilization_zero: (adapters.model_params_default_members, inputs.no_arguments, {}),
    bad.by_value_into_float_mirror: (adapters.c_default_through_mirror, inputs.no_arguments, {}),
    bad.by_value_into_mid_struct_mirror: (adapters.c_default_through_mirror, inputs.no_arguments, {}),
    bad.round_trip_float_utilization: (adapters.round_trip, inputs.engine_params, {"gpu_memory_utilization": 0.85}),
    bad.round_trip_int32_byte_budget: (adapters.round_trip, inputs.engine_params, {"kv_cache_memory_bytes": 2**32}),
    bad.round_trip_field_inserted_mid_struct: (adapters.round_trip, inputs.engine_params, {"device": 2}),
    bad.round_trip_zero_utilization_literal: (adapters.round_trip, inputs.engine_params, {}),
    bad.round_trip_strings_as_latin1: (adapters.round_trip, inputs.engine_params, {"model_path": "é"}),
    bad.pool_zero_utilization_literal: (adapters.pool_from_v16_struct, inputs.v15_struct, {}),
    bad.pool_zero_utilization_explicit: (adapters.pool_from_v16_struct, inputs.v15_struct, {}),
    bad.load_sub_block_budget_model_load: (adapters.load_verdict, inputs.load_call,
                                           {"members": {"kv_cache_memory_bytes": 1}}),
    bad.load_utilization_clamped: (adapters.load_verdict, inputs.load_call, {"members": {"gpu_memory_utilization": 1.5}}),
    bad.load_negative_budget_unset: (adapters.load_verdict, inputs.load_call, {"members": {"kv_cache_memory_bytes": -8}}),
    bad.load_nan_utilization_unnamed: (adapters.load_verdict, inputs.load_call,
                                       {"members": {"gpu_memory_utilization": float("nan")}}),
    bad.load_message_without_member: (adapters.load_verdict, inputs.load_call, {"members": {"device": 4}}),
    bad.load_status_renumbered: (adapters.load_verdict, inputs.load_call, {"members": {"device": 4}}),
    bad.history_reads_annotations_only: (header_history, inputs.header_text, gate_case_input("history", "port-real-structure-v18")),
    bad.history_bump_needs_a_member: (header_history, inputs.header_text, {"variant": "entry-point-bump"}),
    bad.history_any_bump_accepted: (header_history, inputs.header_text, {"variant": "bump-without-history-entry"}),
    bad.history_every_version_remark_is_a_log_entry: (header_history, inputs.header_text,
                                                       gate_case_input("history", "port-real-structure-v18")),
    bad.history_ignores_log_names: (header_history, inputs.header_text, gate_case_input("history", "port-real-structure-member-without-heading")),
    bad.load_block_count_wrapped: (adapters.load_verdict, inputs.load_call, {
        "members": {"kv_cache_memory_bytes": 2**33},
        "probe": {"layers": 1, "num_kv_heads": 1, "head_size": 1, "block_size": 1, "dtype": "float16"}}),
    bad.version_bump_without_member: (checked_abi_version, inputs.library, {"library": "spec"}),
    bad.version_unchecked: (checked_abi_version, inputs.library, {"library": "v15"}),
    bad.cli_writes_default_utilization: (adapters.engine_params_via_c, inputs.argv, {"argv": []}),
    bad.cli_strtoll_kv_memory: (adapters.engine_params_via_c, inputs.argv, {"argv": ["--kv-cache-memory", "4GiB"]}),
    bad.cli_zero_utilization_means_default: (adapters.engine_params_via_c, inputs.argv,
                                             {"argv": ["--gpu-memory-utilization", "0"]}),
    bad.example_cli_program_name_twice: (adapters.example_cli_run, lambda data: Call(kwargs=data), {"argv": ["--bogus"]}),
    bad.example_cli_struct_shows_engine_utilization: (adapters.example_cli_run, lambda data: Call(kwargs=data),
                                                      {"argv": []}),
}


# known-bads that raise the right class with a message missing a fact -> (correct, builder, input, fact)
BY_MESSAGE = {
    bad.history_insertion_without_offsets: (header_history, inputs.header_text,
                                            gate_case_input("history", "port-real-structure-inserted-before-device"),
                                            "device 84 -> 88"),
    bad.version_claims_layouts_differ: (checked_abi_version, inputs.library,
                                        gate_case_input("version", "port-v18-library-same-struct"),
                                        "vllm_model_params is the same in v18 and v16"),
}


def _message(target, call) -> str:
    with pytest.raises(Exception) as caught:
        call.apply(target)
    return str(caught.value)


@pytest.mark.parametrize("known_bad", list(BY_MESSAGE), ids=lambda f: f.__name__)
def test_known_bad_message_lacks_the_fact(compiler, known_bad):
    correct, builder, data, fact = BY_MESSAGE[known_bad]
    call = builder(data)
    assert fact in _message(correct, call) and fact not in _message(known_bad, call)


@pytest.mark.parametrize("known_bad", list(DISCRIMINATING), ids=lambda f: f.__name__)
def test_known_bad_differs_from_correct(compiler, known_bad):
    correct, builder, data = DISCRIMINATING[known_bad]
    call = builder(data)
    assert _outcome(known_bad, call) != _outcome(correct, call)


def test_every_known_bad_of_the_gate_file_is_covered_here():
    gates = yaml.safe_load(GATE_FILE.read_text(encoding="utf-8"))["gates"]
    listed = {entry.split(":")[1] for gate in gates for entry in gate.get("known_bad", {}).values()}
    assert listed == {f.__name__ for f in (*DISCRIMINATING, *BY_MESSAGE)}
    assert all(gate.get("known_bad") for gate in gates)
