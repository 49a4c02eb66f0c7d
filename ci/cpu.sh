#!/usr/bin/env bash
# The CPU job: the test suite (the README's test command) and every row's cpu gates, with reports kept.
# Expects the project installed (pip install -e '.[test]'). Exit status: the first failing step's.
set -euo pipefail
cd "$(dirname "$0")/.."
reports="${GATES_REPORTS:-reports}"
mkdir -p "$reports"

echo "== pytest -m cpu"
python -m pytest -m cpu --junitxml="$reports/pytest-cpu.xml"

echo "== gates run --marker cpu"
gates run --marker cpu --json "$reports/gates-cpu.json" --markdown "$reports/gates-cpu.md" --junit "$reports/gates-cpu.xml"

echo "== gates audit --marker cpu"
gates audit --marker cpu

if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$reports/gates-cpu.md" >> "$GITHUB_STEP_SUMMARY"; fi
