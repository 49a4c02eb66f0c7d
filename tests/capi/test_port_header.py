"""The C++ port's header convention ("(ABI vN)" headings, a prose version log), entry-point-only bumps, the configured
header and library, and block counts the int32_t cannot hold (issue 12, items 5 and 6; CAPI-1.6, CAPI-3, CAPI-8.3)."""
from __future__ import annotations

import pytest
import vllm_gates

from gates.rows.capi_abi import build as inputs
from impl.capi import engine_load
from impl.capi.abi import FIELD_SINCE, VllmStatus
from impl.capi.errors import AbiHistoryError, AbiVersionMismatch
from impl.capi.header_reader import ANNOTATIONS, HEADINGS, read_header
from impl.capi.history import header_history
from impl.capi.layout import model_params_layout
from impl.capi.library import checked_abi_version
from impl.entrypoints.model_loader import EngineParams, resolve_num_blocks
from oracles.abi import header as oracle_header
from oracles.abi.history import compiled_history
from oracles.abi.layout import header_layout
from oracles.abi.library import c_check
from tests.capi.conftest import gate_case_input

pytestmark = pytest.mark.cpu

PORT_V18 = "port-v18-real-structure.h"
FOUR_BYTE_PROBE = {"layers": 1, "num_kv_heads": 1, "head_size": 1, "block_size": 1, "dtype": "float16"}


def _text(name: str) -> str:
    """The fixture, or the header of the history gate's case ``name`` (the fixture with its edits)."""
    return inputs.fixture_text(name) if name.endswith(".h") else inputs.header_of(gate_case_input("history", name))


def test_port_convention_reads_versions_from_headings_and_runs():
    facts = read_header(_text(PORT_V18))
    assert facts.convention == HEADINGS and facts.abi_version == 18
    assert {m.name: m.since for m in facts.members} == dict(FIELD_SINCE)  # kv_cache_memory_bytes joins the v16 run
    assert facts.log[5] == ("reasoning_parser",) and facts.log[9] == ("max_num_batched_tokens",)
    assert facts.log[17] == () and facts.log[18] == () and 16 not in facts.log and 1 not in facts.log
    assert read_header(inputs.SPEC_HEADER.read_text(encoding="utf-8")).convention == ANNOTATIONS


def test_the_oracle_reads_the_port_convention_the_same_way():
    ours, theirs = read_header(_text(PORT_V18)), oracle_header.read_header(_text(PORT_V18))
    assert theirs.convention == oracle_header.HEADINGS
    assert [(m.name, m.ctype, m.since) for m in ours.members] == [(f.name, f.ctype, f.since) for f in theirs.fields]
    assert dict(ours.log) == theirs.history


def test_v16_struct_at_version_18_passes(compiler):
    result = header_history(_text(PORT_V18))
    assert result["abi_version"] == 18
    assert result["versions"]["v17"] == result["versions"]["v18"] == list(FIELD_SINCE)
    assert compiled_history(_text(PORT_V18)) == result


def test_member_inserted_before_device_names_it_and_the_offsets(compiler):
    text = _text("port-real-structure-inserted-before-device")
    with pytest.raises(AbiHistoryError) as refused:
        header_history(text)
    message = str(refused.value)
    assert "'disable_sliding_window' [v17] stands before 'device' [v14]" in message
    assert "device 84 -> 88, gpu_memory_utilization 88 -> 96, kv_cache_memory_bytes 96 -> 104" in message
    with pytest.raises(oracle_header.AbiHistoryError, match="device is at offset 84 in the v14 struct but at 88"):
        compiled_history(text)


@pytest.mark.parametrize("name, fact", [
    ("port-real-structure-unexplained-bump", "v18 has no member and no entry in the version history"),
    ("port-real-structure-member-without-bump", "VLLM_ABI_VERSION is 18 but the newest member is from v19"),
    ("port-real-structure-member-without-heading", "names vllm_model_params.offload_config, but the struct has 'offload_config' in "
                                   "its (ABI v9) run"),
])
def test_port_headers_the_history_rule_refuses(compiler, name, fact):
    with pytest.raises(AbiHistoryError) as refused:
        header_history(_text(name))
    assert fact in str(refused.value)
    with pytest.raises(oracle_header.AbiHistoryError):
        compiled_history(_text(name))


def test_our_convention_accepts_a_bump_its_history_explains(compiler):
    explained = inputs.header_of({"variant": "entry-point-bump"})
    assert header_history(explained)["versions"]["v17"] == list(FIELD_SINCE)
    assert compiled_history(explained) == header_history(explained)
    with pytest.raises(AbiHistoryError, match="v17 has no member and no entry"):
        header_history(inputs.header_of({"variant": "bump-without-history-entry"}))


def test_rendered_port_header_reads_as_the_spec_header(spec_text):
    members = [list(m) for m in inputs.V16_MEMBERS]
    history = {v: [n for n, _, s in members if s == v] for v in range(1, 17)}
    rendered = inputs.header_of({"members": members, "abi_version": 16, "history": history, "style": "headings"})
    assert read_header(rendered).convention == HEADINGS
    assert header_history(rendered) == header_history(spec_text)


def test_port_fixture_lays_out_as_the_mirror(compiler):
    layout = header_layout(inputs.FIXTURES / PORT_V18)
    assert layout == model_params_layout()


@pytest.fixture
def configured(monkeypatch):
    """Point the builders' settings at the port fixture header (and, when given, a library)."""
    def point(**settings: str) -> None:
        monkeypatch.setattr(vllm_gates, "settings", lambda: dict(settings), raising=False)
    return point


def test_settings_name_the_header_and_library(compiler, configured):
    assert inputs.configured_header() == inputs.SPEC_HEADER
    configured(header=f"gates/rows/capi_abi/fixtures/{PORT_V18}")
    assert inputs.header_of({"header": "configured"}) == _text(PORT_V18)
    call = inputs.library({"library": "configured"})  # the stand-in built from the configured header: v18
    with pytest.raises(AbiVersionMismatch) as refused:
        call.apply(checked_abi_version)
    assert "vllm_model_params is the same in v18 and v16" in str(refused.value)
    assert "layouts differ" not in str(refused.value)
    configured(header=f"gates/rows/capi_abi/fixtures/{PORT_V18}", library="build/libvllm.so")
    assert inputs.configured_library() == inputs.ROOT / "build" / "libvllm.so"


def test_a_version_mismatch_says_what_it_knows_of_the_layouts(compiler):
    differ = inputs.library({"library": "v15"})
    with pytest.raises(AbiVersionMismatch, match="v15 but this binding mirrors v16.*layouts differ"):
        differ.apply(checked_abi_version)
    unknown = inputs.library({"library": "v17-appended"})
    with pytest.raises(AbiVersionMismatch, match="not known without the library's header"):
        checked_abi_version(unknown.args[0])


def test_block_count_above_int32_is_refused_naming_count_and_limit(compiler):
    probe = inputs.probe_config(FOUR_BYTE_PROBE)
    with pytest.raises(ValueError, match="2147483648 KV blocks of 4 bytes, more than the 2147483647 an engine "
                                         "counts \\(vllm_model_params.num_blocks is an int32_t\\)"):
        resolve_num_blocks(EngineParams(kv_cache_memory_bytes=2**33), probe)
    assert resolve_num_blocks(EngineParams(kv_cache_memory_bytes=2**33 - 4), probe) == 2**31 - 1
    result = engine_load(inputs.struct_of({"kv_cache_memory_bytes": 2**33}), probe)
    assert result.status is VllmStatus.VLLM_ERR_INVALID_ARGUMENT and result.num_blocks is None
    assert "vllm_model_params.kv_cache_memory_bytes" in result.error and "2147483647" in result.error
    verdict = c_check(inputs.SPEC_HEADER, inputs.raw_members({"kv_cache_memory_bytes": 2**33}), 4)
    assert (verdict["status"], verdict["field"]) == ("VLLM_ERR_INVALID_ARGUMENT", "kv_cache_memory_bytes")
