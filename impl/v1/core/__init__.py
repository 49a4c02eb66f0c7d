"""KV-cache core utilities of the v1 engine (mirrors vllm/v1/core/)."""
