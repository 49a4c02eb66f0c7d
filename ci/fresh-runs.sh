#!/usr/bin/env bash
# The README's main job, `gates run`, N times in a row (default 20), each a fresh process under the default
# Hypothesis profile (`dev`: a fresh seed each run, printed), as a new user would run it (issue 25). CI's fixed seed
# never explores past its own examples; this does. Exits 0 only when every run exited 0; each failing run's output is
# kept (its seed and rerun line are in it) under $GATES_FRESH_LOGS (default reports/fresh-runs).
#
# Usage: bash ci/fresh-runs.sh [N] [-- extra `gates run` arguments, e.g. --marker cpu]
set -uo pipefail
cd "$(dirname "$0")/.."
runs="${1:-20}"
case "$runs" in
  ''|*[!0-9]*|0) echo "ci/fresh-runs.sh: N must be a whole number of runs >= 1, got '$runs'" >&2; exit 2 ;;
esac
shift $(( $# > 0 ? 1 : 0 ))
[ "${1:-}" = "--" ] && shift
logs="${GATES_FRESH_LOGS:-reports/fresh-runs}"
mkdir -p "$logs"
failed=0
for i in $(seq 1 "$runs"); do
  log="$logs/run-$i.log"
  start=$SECONDS
  # CI selects the derandomized `ci` profile; a fresh run is what a user's shell gets, so CI is unset here.
  env -u CI python -m _vllm_gates.frontends.cli run "$@" > "$log" 2>&1
  status=$?
  seed=$(grep -m1 -o 'seed[ =:]*[0-9]\+' "$log" | head -n 1 | grep -o '[0-9]\+$' || true)
  echo "run $i/$runs: exit $status in $((SECONDS - start)) s${seed:+, seed $seed}"
  if [ "$status" -ne 0 ]; then
    failed=$((failed + 1))
    echo "  kept: $log"; grep -E '^(FAILED|ERROR)|rerun:' "$log" | head -n 10 | sed 's/^/  /'
  else
    rm -f "$log"
  fi
done
echo "ci/fresh-runs.sh: $((runs - failed)) of $runs fresh runs exited 0"
[ "$failed" -eq 0 ]
