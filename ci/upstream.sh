#!/usr/bin/env bash
# The upstream job: vLLM 0.33.0 (the pin) installed into the current environment by ci/install-upstream.sh, then
# every row's upstream gates judged against it; a row's upstream-parity claim is met only here (docs/upstream.md).
# Expects the project installed (pip install -e '.[test]'). Exit: gates run's (README, "Exit codes").
set -uo pipefail
cd "$(dirname "$0")/.."
reports="${GATES_REPORTS:-reports}"
mkdir -p "$reports"
bash ci/install-upstream.sh || exit 3
export VLLM_TARGET_DEVICE=cpu
echo "== the adapters' smoke tests (tests/upstream)"
python -m pytest -q -p no:cacheprovider tests/upstream || exit $?
echo "== gates run --marker upstream (vLLM $(python -c 'from importlib.metadata import version; print(version("vllm"))'))"
# The CPU job's report, when this machine ran it (.ci/run), is the evidence for the lifecycle claims this run does not
# execute; without it they are UNPROVEN (exit 6), which the verdict job settles with every job's evidence.
evidence=()
[ -f "$reports/gates-cpu.json" ] && evidence=(--evidence "$reports/gates-cpu.json")
status=0
python -m _vllm_gates.frontends.cli run --marker upstream "${evidence[@]}" --json "$reports/gates-upstream.json" \
  --markdown "$reports/gates-upstream.md" --junit "$reports/upstream.xml" || status=$?
echo "ci/upstream.sh: exit $status; reports in $reports"
[ "$status" -eq 6 ] && [ ${#evidence[@]} -eq 0 ] && { echo "ci/upstream.sh: exit 6 (claims awaiting the CPU job's evidence) counts as success here"; exit 0; }
exit "$status"
