"""The implementation under gate: a Python port mirroring vLLM's engine modules (stdlib and torch only)."""
