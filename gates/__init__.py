"""Gate definitions (rows/*.yaml), the harness that runs them, input builders, strategies and known-bad implementations."""
