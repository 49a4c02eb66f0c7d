"""One gate run: selection, each gate's items and checks, the session that judges, evidence, exit codes."""
