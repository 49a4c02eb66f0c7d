"""The models of the MODEL-TAPS gate (gates/rows/model_taps/fixtures) as the tests call decoder-taps on them."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

FIXTURES = Path(__file__).resolve().parents[2] / "gates" / "rows" / "model_taps" / "fixtures"
TINY = {"layers": 2, "hidden": 64, "num_heads": 8, "num_kv_heads": 2, "head_dim": 8, "ffn": 64, "vocab": 130,
        "tie_word_embeddings": False, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position": 128}
FOUR = {**TINY, "layers": 4, "rms_norm_eps": 1e-2}
IDS = torch.tensor([3, 129, 64, 0, 77, 120, 17, 101], dtype=torch.int64)


@pytest.fixture(scope="session")
def tiny() -> dict[str, torch.Tensor]:
    return load_file(str(FIXTURES / "qwen3_tiny.safetensors"))


@pytest.fixture(scope="session")
def four() -> dict[str, torch.Tensor]:
    return load_file(str(FIXTURES / "qwen3_four_layers.safetensors"))


def as_numpy(weights: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    return {name: tensor.numpy() for name, tensor in weights.items()}


def relative_l2(actual: torch.Tensor, expected: np.ndarray) -> float:
    """||actual - expected|| / ||expected||, in float64."""
    difference = actual.double().numpy() - expected
    return float(np.linalg.norm(difference) / np.linalg.norm(expected))
