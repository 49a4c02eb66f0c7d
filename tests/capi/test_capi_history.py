"""The header's append-only history: the mirror's reader and the compiled oracle on the variant headers (CAPI-3)."""
from __future__ import annotations

import pytest

from gates.rows.capi_abi.build import VARIANTS, header_of
from impl.capi.errors import AbiHistoryError
from impl.capi.history import header_history
from oracles.abi import header as oracle_header
from oracles.abi.history import compiled_history

pytestmark = pytest.mark.cpu

REFUSED = {
    "inserted-mid-struct": "'offload_config' \\[v17\\] stands before 'enable_jump_forward'",
    "inserted-before-device": "'disable_sliding_window' \\[v17\\] stands before 'device'",
    "bump-without-history-entry": "v17 has no member and no entry in the version history",
    "member-without-bump": "VLLM_ABI_VERSION is 16 but the newest member is from v17",
    "member-without-history-entry": "v16 history entry appends",
}


def _outcome(function, text):
    try:
        return function(text)
    except (AbiHistoryError, oracle_header.AbiHistoryError) as exc:
        return type(exc).__name__


@pytest.mark.parametrize("variant", VARIANTS)
def test_reader_and_compiled_oracle_agree(compiler, variant):
    text = header_of({"variant": variant})
    assert _outcome(header_history, text) == _outcome(compiled_history, text)


@pytest.mark.parametrize("variant", sorted(REFUSED))
def test_broken_histories_are_refused_with_the_reason(variant):
    with pytest.raises(AbiHistoryError, match=REFUSED[variant]):
        header_history(header_of({"variant": variant}))


def test_compiled_oracle_sees_offsets_move(compiler):
    with pytest.raises(oracle_header.AbiHistoryError, match="enable_jump_forward is at offset 80 in the v10 struct but at 88"):
        compiled_history(header_of({"variant": "inserted-mid-struct"}))


def test_rendered_v16_is_the_spec_header(spec_text):
    assert header_history(header_of({"variant": "v16"})) == header_history(spec_text)
    assert header_history(header_of({"variant": "v17-appended"}))["versions"]["v17"][-1] == "tensor_parallel_size"


def test_member_without_annotation_is_refused(compiler, spec_text):
    text = spec_text.replace("/* [v14] Device:", "/* Device:")
    with pytest.raises(AbiHistoryError, match="'device' has no '\\[vN\\]' annotation"):
        header_history(text)
    with pytest.raises(oracle_header.AbiHistoryError, match="'device' has no '\\[vN\\]' annotation"):
        compiled_history(text)
