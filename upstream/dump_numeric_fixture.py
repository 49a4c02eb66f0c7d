"""Writes gates/rows/layers_norm_rope/fixtures/rms_norm_fp16.safetensors: one RMSNorm case as vLLM 0.33.0 computes it
(input ``x``, ``weight`` and vLLM's ``output`` of RMSNorm.forward_native), the recorded reference activations the
rms-norm-recorded gate judges the port against where vLLM is not installed (issue 29 item 7).

Regenerate it (only when the pin or the case changes; the gate then needs no vLLM) in an environment with the pin
installed (bash ci/install-upstream.sh), from the repository root:

    VLLM_TARGET_DEVICE=cpu python -m upstream.dump_numeric_fixture

The case: 4 tokens x hidden 4096, float16, x = 10·N(0, 1) and weight = 1 + 0.1·N(0, 1) drawn in float32 by numpy's
PCG64 from seed 2933 and rounded to float16, eps 1e-6 (``metadata`` of the file records it).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from upstream.norm_rope import rms_norm

TARGET = Path(__file__).resolve().parent.parent / "gates/rows/layers_norm_rope/fixtures/rms_norm_fp16.safetensors"
SEED, TOKENS, HIDDEN, EPS = 2933, 4, 4096, 1e-6


def main() -> int:
    """Draw the case, run vLLM's layer on it, and write the three tensors with the case in the metadata."""
    rng = np.random.Generator(np.random.PCG64(SEED))
    x = torch.from_numpy((10.0 * rng.standard_normal((TOKENS, HIDDEN), dtype=np.float32)).astype(np.float16))
    weight = torch.from_numpy((1.0 + 0.1 * rng.standard_normal(HIDDEN, dtype=np.float32)).astype(np.float16))
    output = rms_norm(x, weight, EPS)
    from importlib.metadata import version
    save_file({"x": x, "weight": weight, "output": output.contiguous()}, str(TARGET),
              metadata={"eps": repr(EPS), "seed": str(SEED), "vllm": version("vllm"),
                        "made_by": "upstream/dump_numeric_fixture.py (RMSNorm.forward_native)"})
    print(f"wrote {TARGET.relative_to(Path.cwd()) if TARGET.is_relative_to(Path.cwd()) else TARGET}: "
          f"x {tuple(x.shape)} float16, weight ({HIDDEN},), output; vLLM {version('vllm')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
