"""Imported first by each upstream test module: skips that module, with the reason, unless the pinned vLLM release
is installed here (bash ci/install-upstream.sh installs it)."""
from __future__ import annotations

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed (bash ci/install-upstream.sh)")

import upstream  # noqa: E402

if upstream.installed_version() != upstream.PINNED_VERSION:  # pragma: no cover - another release installed
    pytest.skip(f"vLLM {upstream.installed_version()} is installed, the pin is {upstream.PINNED_VERSION}",
                allow_module_level=True)
