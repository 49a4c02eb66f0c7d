#!/usr/bin/env bash
# The upstream oracle tier (issue 13): installs the pinned vLLM (0.33.0) into the *current* environment, which
# already has torch and this project (`pip install torch==2.13.0 && pip install -e '.[test]'`), without pulling a
# CUDA build of torch and without replacing the installed torch:
#   1. the packages in ci/upstream-requirements.txt, exact pins, --no-deps (the list is its own closure);
#   2. vLLM's wheel, --no-deps: $VLLM_WHEEL when set (a path to vllm-0.33.0-*.whl), else vllm==0.33.0 from the index;
#   3. a check: torch is the version it was, vLLM is the pin, and every module upstream/ uses imports.
# Every pip call holds torch with a constraint (ci/upstream-constraints.txt, or the installed version when that is
# another one), so even a mistake in the list cannot make pip replace torch.
#
# Why a script and not a pip extra (`pip install -e '.[upstream]'`): an extra is a list of PEP 508 requirements,
# and a requirement cannot say --no-deps. `vllm==0.33.0` in an extra makes pip resolve vLLM's whole Requires-Dist:
# torch==2.14.0 (against the installed 2.13.0: "ResolutionImpossible: vllm 0.33.0 depends on torch==2.14.0 / The
# user requested (constraint) torch==2.13.0"; without the constraint pip replaces torch with a multi-GB CUDA
# build), torchaudio/torchvision, and CUDA-only wheels (flashinfer-python, nvidia-cutlass-dsl, tilelang,
# quack-kernels, PyNvVideoCodec, ...). An extra could carry this requirements list but not vLLM itself, so the
# tier would still need this second step; one script keeps it one command.
#
# Usage (repository root or anywhere):  bash ci/install-upstream.sh
#   VLLM_WHEEL=/path/to/vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl bash ci/install-upstream.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
py="${PYTHON:-python}"
pin="0.33.0"

torch_version="$("$py" -c 'import torch, sys; sys.stdout.write(torch.__version__.split("+")[0])' 2>/dev/null)" || {
  echo "ci/install-upstream.sh: torch is not installed in this environment ($py); install it first" \
       "(pip install torch==2.13.0), then the project (pip install -e '.[test]')" >&2
  exit 2
}
constraints="$here/upstream-constraints.txt"
if ! grep -qx "torch==$torch_version" "$constraints"; then
  tmp_constraints="$(mktemp)"
  trap 'rm -f "$tmp_constraints"' EXIT
  echo "torch==$torch_version" > "$tmp_constraints"
  constraints="$tmp_constraints"
  echo "ci/install-upstream.sh: torch $torch_version is installed (ci/upstream-constraints.txt names another); holding $torch_version"
fi

pip_install() { "$py" -m pip install --quiet --disable-pip-version-check --no-deps -c "$constraints" "$@"; }

echo "ci/install-upstream.sh: the pinned list (ci/upstream-requirements.txt), --no-deps"
pip_install -r "$here/upstream-requirements.txt"

# vllm.usage.usage_lib imports `cpuinfo`. This project's test extra already brings a distribution providing it
# (py-cpuinfo2, through pytest-benchmark); installing vLLM's py-cpuinfo beside it would overwrite the same files.
if ! "$py" -c 'import cpuinfo' 2>/dev/null; then
  pip_install 'py-cpuinfo==9.0.0'
fi
# torch.utils.cpp_extension, which vLLM imports, imports setuptools: a python3.11 venv has it, a 3.12 one does not.
# vLLM asks for setuptools>=78.1.1,<81 on Python > 3.11; an installed one is left as it is.
if ! "$py" -c 'import setuptools' 2>/dev/null; then
  pip_install 'setuptools==80.9.0'
fi

if [ -n "${VLLM_WHEEL:-}" ]; then
  [ -f "$VLLM_WHEEL" ] || { echo "ci/install-upstream.sh: VLLM_WHEEL=$VLLM_WHEEL is not a file" >&2; exit 2; }
  echo "ci/install-upstream.sh: vLLM from $VLLM_WHEEL, --no-deps"
  pip_install "$VLLM_WHEEL"
else
  echo "ci/install-upstream.sh: vllm==$pin from the index, --no-deps"
  pip_install "vllm==$pin"
fi

echo "ci/install-upstream.sh: checking"
cd "$root"
VLLM_TARGET_DEVICE="${VLLM_TARGET_DEVICE:-cpu}" "$py" - "$torch_version" "$pin" <<'EOF'
import sys
torch_before, pin = sys.argv[1], sys.argv[2]
import torch
now = torch.__version__.split("+")[0]
if now != torch_before:
    sys.exit(f"ci/install-upstream.sh: torch changed from {torch_before} to {now}")
import upstream
info = upstream.check_install()   # imports every vLLM module the adapters use; raises with the module that fails
if info["vllm"] != pin:
    sys.exit(f"ci/install-upstream.sh: vllm {info['vllm']} is installed, the pin is {pin}")
print(f"ci/install-upstream.sh: vllm {info['vllm']} with torch {torch.__version__}: "
      f"{len(info['modules'])} modules import")
EOF
