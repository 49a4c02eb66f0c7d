"""A toy implementation, oracle and known-bad used by the harness's own tests (EX-1.x)."""
