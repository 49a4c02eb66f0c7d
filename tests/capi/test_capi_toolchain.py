"""The compiled oracles' toolchain: strict flags, hash-keyed cache, and a missing compiler as a skip (CAPI-1.1, CAPI-2.6)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from gates.rows.capi_abi import build as inputs
from oracles.abi import toolchain
from oracles.abi.layout import header_layout, measure

pytestmark = pytest.mark.cpu


def test_spec_header_compiles_strictly_and_matches_the_facts(compiler, spec_text):
    layout = measure(spec_text)
    assert (layout.size, layout.align) == (104, 8)
    offsets = {f.name: f.offset for f in layout.fields}
    assert offsets["device"] == 84 and offsets["gpu_memory_utilization"] == 88 and offsets["kv_cache_memory_bytes"] == 96
    types = {f.name: f.ctype for f in layout.fields}
    assert types["gpu_memory_utilization"] == "double" and types["kv_cache_memory_bytes"] == "int64_t"


def test_a_warning_is_an_error(compiler, spec_text):
    with pytest.raises(toolchain.CompileError, match="unused"):
        toolchain.build("warns", spec_text, '#include "vllm.h"\nint main(void) { int unused; return 0; }\n', shared=False)


def test_builds_are_cached_by_content(compiler, spec_text):
    first = toolchain.build("probe", spec_text, '#include "vllm.h"\nint main(void) { return 0; }\n', shared=False)
    stamp = first.stat().st_mtime_ns
    again = toolchain.build("probe", spec_text, '#include "vllm.h"\nint main(void) { return 0; }\n', shared=False)
    edited = toolchain.build("probe", spec_text + "\n/* edited */\n", '#include "vllm.h"\nint main(void) { return 0; }\n',
                             shared=False)
    assert again == first and again.stat().st_mtime_ns == stamp
    assert edited != first
    assert first.is_relative_to(toolchain.cache_root())


def test_cache_dir_defaults_under_the_temp_dir(monkeypatch):
    monkeypatch.delenv("VLLM_GATES_CACHE_DIR")
    assert toolchain.cache_root().parent == Path(tempfile.gettempdir())


def test_missing_compiler_is_a_clear_error_and_a_gate_skip(monkeypatch, spec_text):
    monkeypatch.setenv("CC", "no-such-cc-for-vllm-gates")
    with pytest.raises(toolchain.CompilerUnavailable, match="no-such-cc-for-vllm-gates.*not on PATH"):
        header_layout(inputs.SPEC_HEADER)
    with pytest.raises(pytest.skip.Exception, match="compiled C ABI oracle unavailable"):
        inputs.spec_header({})
    with pytest.raises(pytest.skip.Exception):
        inputs.header_text({"header": "spec"})


def test_the_compiler_is_asked_its_version_once_per_file_not_once_per_call(monkeypatch, tmp_path):
    log = tmp_path / "calls"
    fake = tmp_path / "fakecc"
    fake.write_text(f"#!/bin/sh\necho run >> {log}\necho 'fakecc 1.0'\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    assert [toolchain.find_compiler().version for _ in range(5)] == ["fakecc 1.0"] * 5
    assert log.read_text().count("run") == 1
    fake.write_text(f"#!/bin/sh\necho run >> {log}\necho 'fakecc 2.0'\n", encoding="utf-8")  # a new file: asked again
    os.utime(fake, ns=(1, 1))
    assert toolchain.find_compiler().version == "fakecc 2.0"
    assert log.read_text().count("run") == 2
