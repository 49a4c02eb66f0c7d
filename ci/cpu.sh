#!/usr/bin/env bash
# The CPU job: the README's test command, run once. It runs the harness's own tests and every row's cpu gates;
# the plugin then prints the row table, writes the reports and exits with the claims' exit code (README, "Exit codes").
# Expects the project installed (pip install -e '.[test]'). The reports are written whether the run passes or fails;
# $GATES_REPORTS/gates-cpu.json is the CPU side's evidence for `gates verdict` (docs/evidence.md).
set -uo pipefail
cd "$(dirname "$0")/.."
reports="${GATES_REPORTS:-reports}"
mkdir -p "$reports"

echo "== pytest -m cpu"
status=0
python -m pytest -m cpu --junitxml="$reports/cpu.xml" --gates-json="$reports/gates-cpu.json" \
  --gates-markdown="$reports/gates-cpu.md" || status=$?

if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$reports/gates-cpu.md" ]; then cat "$reports/gates-cpu.md" >> "$GITHUB_STEP_SUMMARY"; fi
echo "ci/cpu.sh: exit $status; reports in $reports"
exit "$status"
