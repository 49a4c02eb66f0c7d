"""The history is the comments before VLLM_ABI_VERSION (issue 26, CAPI-1.7): both Python readers on a header with the
port's whole comment structure, remarks after the macro that are never log entries, and the fixture edits of the
history gate's cases. The C++ reader is judged on the same cases by `gates run CAPI-ABI --impl cpp`."""
from __future__ import annotations

import pytest

from gates.rows.capi_abi import build as inputs
from impl.capi.abi import FIELD_SINCE
from impl.capi.errors import AbiHistoryError
from impl.capi.header_reader import HEADINGS, history_comment_lines, read_header
from impl.capi.history import header_history
from oracles.abi import header as oracle_header
from oracles.abi.history import compiled_history

pytestmark = pytest.mark.cpu

REAL = "port-v18-real-structure.h"
SERVER = "VLLM_API int32_t vllm_server_main("
LOG_VERSIONS = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17, 18]  # the port's log: no v1, no v16


def _real(*edits: tuple[str, str]) -> str:
    return inputs.header_of({"fixture": REAL, "edits": [list(edit) for edit in edits]})


def test_both_readers_take_the_log_from_the_comments_before_the_macro():
    ours, theirs = read_header(_real()), oracle_header.read_header(_real())
    assert ours.convention == HEADINGS and ours.abi_version == theirs.abi_version == 18
    assert sorted(ours.log) == LOG_VERSIONS
    assert ours.log[5] == ("reasoning_parser",) and ours.log[4] == () and ours.log[9] == ("max_num_batched_tokens",)
    assert ours.log[17] == ours.log[18] == ()  # vllm_video_model_params.family is another struct's member
    assert dict(ours.log) == theirs.history
    assert {m.name: m.since for m in ours.members} == {f.name: f.since for f in theirs.fields} == dict(FIELD_SINCE)


def test_the_history_comments_are_the_file_comment_the_bool_remark_and_the_two_log_comments():
    comments = history_comment_lines(_real())
    assert len(comments) == 4
    assert "ABI version" in comments[2][0] and comments[3][0].startswith(" v18 \u2014 a family seam")


def test_the_real_structure_passes_both_histories(compiler):
    result = header_history(_real())
    assert result["abi_version"] == 18 and result["versions"]["v18"] == list(FIELD_SINCE)
    assert compiled_history(_real()) == result


@pytest.mark.parametrize("remark", [
    "/* v20: a remark past the macro, not an entry of the log. */\n",
    "/* v14: vllm_model_params.device is read by the server too. */\n",
    "/* v18 \u2014 once more, on the server. */\n",
])
def test_a_version_remark_after_the_macro_is_no_log_entry(compiler, remark):
    text = _real((SERVER, remark + SERVER))
    assert read_header(text).log == read_header(_real()).log
    assert oracle_header.read_header(text).history == read_header(_real()).log
    assert header_history(text) == compiled_history(text) == header_history(_real())


def test_a_remark_after_the_macro_does_not_explain_a_bump(compiler):
    text = _real(("#define VLLM_ABI_VERSION 18", "#define VLLM_ABI_VERSION 19"),
                 (SERVER, "/* v19: the server takes a config file. */\n" + SERVER))
    with pytest.raises(AbiHistoryError, match="v19 has no member and no entry in the version history"):
        header_history(text)
    with pytest.raises(oracle_header.AbiHistoryError, match="v19 added no member and the version history has no entry"):
        compiled_history(text)


def test_a_log_entry_in_a_comment_just_before_the_macro_counts(compiler):
    text = _real(("#define VLLM_ABI_VERSION 18", "/* v19: the server takes a config file. */\n#define VLLM_ABI_VERSION 19"))
    assert read_header(text).log[19] == ()
    assert header_history(text)["versions"]["v19"] == list(FIELD_SINCE) == compiled_history(text)["versions"]["v19"]


def test_two_entries_for_one_version_in_the_log_are_refused_by_both_readers():
    text = _real((" * v13: vllm_complete_tokens", " * v12: vllm_complete_tokens"))
    with pytest.raises(AbiHistoryError, match="two entries for v12"):
        read_header(text)
    with pytest.raises(oracle_header.AbiHistoryError, match="two entries for v12"):
        oracle_header.read_header(text)


def test_the_annotations_history_is_read_before_the_macro_only(spec_text):
    remark = "/*\n *   v17  +model_path: a remark after the macro, in the history's own shape.\n */\n"
    text = spec_text.replace("#define VLLM_ABI_VERSION 16\n", "#define VLLM_ABI_VERSION 16\n" + remark)
    assert read_header(text).log == read_header(spec_text).log
    assert oracle_header.read_header(text).history == dict(read_header(spec_text).log)


@pytest.mark.parametrize("edits, refusal", [
    ([["#define VLLM_ABI_VERSION 17", "x"]], "edits\\[0\\] of fixture .*occurs 0 times, not once"),
    ([["vllm_model_params_default", "x"]], "occurs 2 times, not once"),
    ([["only one text"]], "edits\\[0\\] of fixture .* is \\[old text, new text\\]"),
    ("not a list", "edits of fixture .* are a list of \\[old text, new text\\]"),
])
def test_fixture_edits_apply_once_each_or_are_refused(edits, refusal):
    with pytest.raises(ValueError, match=refusal):
        inputs.header_of({"fixture": REAL, "edits": edits})
