"""The ctypes mirror against the compiled header: layout, versions, defaults, the version handshake (CAPI-2, CAPI-4, CAPI-8)."""
from __future__ import annotations

import ctypes

import pytest

from gates.rows.capi_abi.subjects import c_default_through_mirror, member_values, model_params_default_members
from gates.rows.capi_abi import build as inputs
from impl.capi import VLLM_ABI_VERSION, ModelParams, VllmStatus, model_params_default, open_library
from impl.capi.abi import FIELD_SINCE
from impl.capi.errors import AbiVersionMismatch
from impl.capi.history import header_history
from impl.capi.layout import model_params_layout
from oracles.abi.header import read_header, read_status_codes
from oracles.abi.layout import header_layout
from oracles.abi.library import c_default_values, handshake_library, load

pytestmark = pytest.mark.cpu


def test_mirror_layout_is_the_compilers(compiler):
    assert model_params_layout() == header_layout(inputs.SPEC_HEADER)
    assert ctypes.sizeof(ModelParams) == 104


def test_mirror_versions_are_the_header_annotations(spec_text):
    assert dict(FIELD_SINCE) == {f.name: f.since for f in read_header(spec_text).fields}
    assert read_header(spec_text).abi_version == VLLM_ABI_VERSION == 16
    assert header_history(spec_text)["versions"]["v15"] == [n for n, s in FIELD_SINCE.items() if s <= 15]


def test_status_codes_are_the_headers(spec_text):
    assert read_status_codes(spec_text) == {s.value: s.name for s in VllmStatus}


def test_python_default_equals_c_default(compiler):
    assert member_values(model_params_default()) == c_default_values(inputs.SPEC_HEADER)
    assert model_params_default_members() == c_default_values(inputs.SPEC_HEADER)


def test_c_default_returned_by_value_into_the_mirror(compiler, spec_text):
    library = open_library(load(spec_text).path)
    assert library.abi_version == 16
    assert member_values(library.model_params_default()) == member_values(model_params_default())
    assert c_default_through_mirror() == member_values(model_params_default())


def test_library_of_another_version_is_refused(compiler):
    path = handshake_library(inputs.render_header(*inputs._variant("v17-appended")))
    with pytest.raises(AbiVersionMismatch, match=r"built for vllm C ABI v17 but this binding mirrors v16"):
        open_library(path)
    assert open_library(path, expected_version=17).abi_version == 17


def test_the_strategies_member_list_is_the_mirrors():
    """The judge-side strategies write the v16 members out as plain data: they must be the mirror's."""
    from gates.rows.capi_abi import build, strategies

    assert strategies.V16_MEMBERS == build.V16_MEMBERS
    assert strategies.STRING_MEMBERS == tuple(n for n, t, _ in build.V16_MEMBERS if t == "const char *")
