"""A toy implementation and oracle used by the harness's own tests (EX-1.x)."""
