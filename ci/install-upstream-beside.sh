#!/usr/bin/env bash
# Another vLLM release beside the pin, for `gates upstream-drift --to VERSION` (docs/upstream.md, "Drift"): its wheel
# only, --no-deps, into build/upstream/vllm-VERSION (or DIR). Nothing in the environment changes: the drift probe
# puts that folder first on its own path, and the release runs on the pin's dependencies (ci/install-upstream.sh
# installs them); a module the other release needs and the pin's closure lacks shows as "unavailable" in the report.
#
# Usage:  bash ci/install-upstream-beside.sh VERSION [DIR]
#         VLLM_WHEEL=/path/to/vllm-VERSION-*.whl bash ci/install-upstream-beside.sh VERSION
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-python}"
version="${1:-}"
if ! [[ "$version" =~ ^[0-9]+(\.[0-9]+){1,3}$ ]]; then
  echo "ci/install-upstream-beside.sh: expected a release such as 0.25.0 as the first argument, got '${version}'" >&2
  exit 2
fi
target="${2:-$root/build/upstream/vllm-$version}"
source="vllm==$version"
if [ -n "${VLLM_WHEEL:-}" ]; then
  [ -f "$VLLM_WHEEL" ] || { echo "ci/install-upstream-beside.sh: VLLM_WHEEL=$VLLM_WHEEL is not a file" >&2; exit 2; }
  source="$VLLM_WHEEL"
fi
rm -rf "$target"
mkdir -p "$target"
echo "ci/install-upstream-beside.sh: $source into $target, --no-deps"
"$py" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile --target "$target" "$source"
found="$("$py" - "$target" <<'PY'
import sys
from importlib import metadata
print(next((d.version for d in metadata.distributions(path=[sys.argv[1]]) if d.metadata["Name"] == "vllm"), "none"))
PY
)"
if [ "$found" != "$version" ]; then
  echo "ci/install-upstream-beside.sh: $target holds vllm $found, not $version" >&2
  exit 1
fi
echo "ci/install-upstream-beside.sh: vllm $version in $target (compare: gates upstream-drift --to $version)"
