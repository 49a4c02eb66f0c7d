#!/usr/bin/env bash
# The GPU job: `pytest -m gpu`, run once: the gpu tests and every row's gpu gates, judged by the plugin, reports kept.
# Its JSON report ($GATES_REPORTS/gpu/gates-gpu.json) is the GPU side's evidence (docs/evidence.md); exit 6 (claims
# that rest on cpu gates, not run here) is this job's success: `gates verdict` merges it with the CPU job's evidence.
# Needs a CUDA device and a CUDA build of torch; expects the project installed (pip install -e '.[test]').
# The whole job is bounded by GATES_GPU_BUDGET seconds (default 480, inside a 10-minute slot); each step gets
# what is left. Reports: $GATES_REPORTS/gpu (default reports/gpu). Exit status: the first failing step's
# (124 when a step ran out of time); the reports are written either way.
set -euo pipefail
cd "$(dirname "$0")/.."
reports="${GATES_REPORTS:-reports}/gpu"
budget="${GATES_GPU_BUDGET:-480}"
mkdir -p "$reports"
export CI="${CI:-true}"                                  # the ci hypothesis profile: derandomized, no deadline
export GATES_M3_DEVICE_LOG="$reports/m3-device.log"      # the ROAD-V1-MEM M3 device run appends its figures
: > "$GATES_M3_DEVICE_LOG"
start=$SECONDS

run_step() {  # run_step LOG COMMAND...: bounded by what is left of the budget; the first failure is kept
  local log=$1 rest=$((budget - (SECONDS - start))) rc=0
  shift
  if [ "$rest" -lt 30 ]; then
    echo "ci/gpu.sh: only ${rest} s of the ${budget} s budget left; not running: $*" | tee "$log" >&2
    rc=124
  else
    timeout --kill-after=15 "$rest" "$@" 2>&1 | tee "$log" || rc=$?
  fi
  if [ "$status" -eq 0 ]; then status=$rc; fi
}

echo "== device"
timeout 60 python - <<'EOF' | tee "$reports/device.txt"
import sys
import torch
if not torch.cuda.is_available():
    sys.exit(f"ci/gpu.sh: no CUDA device (torch {torch.__version__}, torch.cuda.is_available() is False); "
             "this job must not pass by skipping every gpu item")
index = torch.cuda.current_device()
free, total = torch.cuda.mem_get_info(index)
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, device {index}: {torch.cuda.get_device_name(index)}, "
      f"capability {torch.cuda.get_device_capability(index)}, {free} of {total} bytes free")
EOF
if command -v nvidia-smi > /dev/null; then nvidia-smi > "$reports/nvidia-smi.txt" 2>&1 || true; fi

status=0
echo "== pytest -m gpu"
run_step "$reports/pytest-gpu.log" python -m pytest -m gpu -rs --durations=10 --junitxml="$reports/gpu.xml" \
  --gates-json="$reports/gates-gpu.json" --gates-markdown="$reports/gates-gpu.md"
if [ "$status" -eq 6 ]; then  # claims unproven: nothing failed here; the cpu gates are the CPU job's evidence to merge
  echo "ci/gpu.sh: exit 6 (claims rest on the CPU job's gates); merge with: gates verdict --evidence <cpu json>" \
       "--evidence $reports/gates-gpu.json"
  status=0
fi

echo "== figures of the M3 device runs ($GATES_M3_DEVICE_LOG)"
cat "$GATES_M3_DEVICE_LOG"
echo "ci/gpu.sh: $((SECONDS - start)) s, exit $status; reports in $reports"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$reports/gates-gpu.md" ]; then cat "$reports/gates-gpu.md" >> "$GITHUB_STEP_SUMMARY"; fi
exit "$status"
