#!/usr/bin/env bash
# The engine's habits: `ruff check` and `mypy` over src/ (their settings: [tool.ruff] and [tool.mypy] in
# pyproject.toml, both on src/ as a whole, so a module moved into a subpackage stays covered). Expects the project
# installed with its test extra (the pinned ruff, mypy and stubs). Exits non-zero when either finds anything; both
# keep their caches in .cache/ (ignored by git), so a warm run takes seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
echo "== ruff check src"
python -m ruff check src || status=$?
echo "== mypy (src)"
mypy_status=0
python -m mypy || mypy_status=$?
[ "$status" -ne 0 ] || status=$mypy_status
echo "ci/lint.sh: exit $status"
exit "$status"
