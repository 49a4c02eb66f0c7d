"""vllm-gates: gate roadmap rows of a vLLM port; an implementation checked against independent oracles.

The public API is what gate content needs: ``Call``, which a gate's builder returns, and ``settings()``, the
settings of the implementation under gate (e.g. the header and library paths it is judged with). Everything else lives in
the private package ``_vllm_gates`` and may change; the command is ``gates`` and the pytest plugin loads itself.
"""
from __future__ import annotations

from _vllm_gates.call import Call
from _vllm_gates.settings import current as settings

__all__ = ["Call", "settings", "__version__"]
__version__ = "0.2.0"
