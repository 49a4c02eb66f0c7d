"""Values compared: strict equality, policies and tolerances, the strength audit, rendering for reports."""
