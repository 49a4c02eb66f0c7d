"""vllm-gates: gate roadmap rows of a vLLM port; an implementation checked against independent oracles.

The public API is what gate content needs: ``Call``, which a gate's builder returns. Everything else lives in
the private package ``_vllm_gates`` and may change; the command is ``gates`` and the pytest plugin loads itself.
"""
from __future__ import annotations

from _vllm_gates.call import Call

__all__ = ["Call", "__version__"]
__version__ = "0.2.0"
