"""The engine of vllm-gates: private; its public face is the package ``vllm_gates``."""
