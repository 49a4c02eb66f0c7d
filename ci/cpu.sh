#!/usr/bin/env bash
# The CPU job: the README's test command, run once. It runs the harness's own tests and every row's cpu gates;
# the plugin then prints the row table, writes the reports and exits with the claims' exit code (README, "Exit codes").
# Then it judges the C++ implementation (drivers/cpp) on the same cpu gates. Expects the project installed
# (pip install -e '.[test,hf]'; without hf the HF reference's tests skip with the reason) and the C++ toolchain
# (ci/install-system-deps.sh). The reports are written whether the run passes or fails;
# $GATES_REPORTS/gates-cpu.json is the CPU side's evidence for `gates verdict` (docs/evidence.md).
set -uo pipefail
cd "$(dirname "$0")/.."
reports="${GATES_REPORTS:-reports}"
mkdir -p "$reports"

# Split over one pytest-xdist worker per core, a whole test or gate file to each (a gate file's subjects then start
# once, in one worker); the controller alone judges, and the reports are a serial run's (tests/harness/test_xdist_runs.py).
# GATES_CI_WORKERS=0 runs it serially.
workers="${GATES_CI_WORKERS:-$(nproc 2>/dev/null || echo 1)}"
case "$workers" in
  ''|*[!0-9]*) echo "ci/cpu.sh: GATES_CI_WORKERS must be a whole number of pytest workers (0 or 1: serial), got '$workers'" >&2
               exit 2 ;;
esac
split=()
[ "$workers" -gt 1 ] && split=(-n "$workers" --dist loadfile)
echo "== pytest -m cpu ${split[*]}"
status=0
python -m pytest -m cpu "${split[@]}" --junitxml="$reports/cpu.xml" --gates-json="$reports/gates-cpu.json" \
  --gates-markdown="$reports/gates-cpu.md" || status=$?

echo "== gates run --impl cpp --marker cpu (the C++ implementation in drivers/cpp, built when out of date)"
cpp_status=0
python -m _vllm_gates.frontends.cli run --impl cpp --marker cpu --json "$reports/gates-cpu-cpp.json" \
  --markdown "$reports/gates-cpu-cpp.md" --junit "$reports/cpu-cpp.xml" || cpp_status=$?
[ "$status" -ne 0 ] || status=$cpp_status

# The audit tables of both runs, from their reports: every audit stand-in and known-bad was judged there once;
# `--evidence` reuses those verdicts under the gates' current fingerprints and runs nothing again.
echo "== gates audit --marker cpu (python, then cpp), from the runs' reports"
for run in "python:gates-cpu.json" "cpp:gates-cpu-cpp.json"; do
  impl="${run%%:*}" report="$reports/${run#*:}"
  [ -f "$report" ] || { echo "ci/cpu.sh: no $report: no audit for $impl"; [ "$status" -ne 0 ] || status=3; continue; }
  audit_status=0
  python -m _vllm_gates.frontends.cli audit --marker cpu --impl "$impl" --evidence "$report" || audit_status=$?
  [ "$status" -ne 0 ] || status=$audit_status
done

# The page people look at (docs/reports.md): the python run's verdicts, and the last mutation run where one was made.
echo "== gates report --html $reports/gates-cpu.html"
report_status=0
python -m _vllm_gates.frontends.cli report --html "$reports/gates-cpu.html" --run "$reports/gates-cpu.json" || report_status=$?
[ "$status" -ne 0 ] || status=$report_status

if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  for md in "$reports/gates-cpu.md" "$reports/gates-cpu-cpp.md"; do [ -f "$md" ] && cat "$md" >> "$GITHUB_STEP_SUMMARY"; done
fi
echo "ci/cpu.sh: exit $status; reports in $reports"
exit "$status"
