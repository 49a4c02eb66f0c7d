"""The whole-model tp-model-greedy of impl/model_executor/models/qwen3.py (spec/tensor-parallel.md TP-5.5, TP-5.6):
a rank that disagrees is named, a known-bad's patch does not outlive its call on the reused world, and the device
operation refuses to run without CUDA."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gates.rows.backend_distributed_tp.known_bad import model as known_bad
from impl.model_executor.models import qwen3

pytestmark = [pytest.mark.cpu, pytest.mark.dist]

CONFIG = {"layers": 1, "hidden": 8, "num_heads": 4, "num_kv_heads": 2, "head_dim": 2, "ffn": 4, "vocab": 10,
          "tie_word_embeddings": False, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position": 16}


def _weights() -> dict[str, torch.Tensor]:
    shapes = qwen3.ModelConfig.from_mapping(CONFIG).weight_shapes()
    generator = torch.Generator().manual_seed(30)
    return {name: torch.randn(shape, generator=generator) for name, shape in shapes.items()}


PROMPT = torch.tensor([1, 9, 4], dtype=torch.int64)


def _rank_one_off(rank: int, tp: int, run: qwen3.GreedyRun) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, logits = qwen3.rank_greedy(rank, tp, run)
    return tokens, logits + (1e-3 if rank == 1 else 0.0)


def test_a_rank_whose_logits_differ_is_named():
    with pytest.raises(RuntimeError, match=r"rank 1's logits differ from rank 0's \(by up to 0\.001"):
        qwen3.run_greedy(CONFIG, _weights(), PROMPT, 2, 2, _rank_one_off)


def test_every_tp_decodes_alike_and_a_known_bad_patch_ends_with_its_call():
    weights = _weights()
    before = qwen3.tp_model_greedy(CONFIG, weights, PROMPT, 4, 4)
    for tp in (1, 2):
        again = qwen3.tp_model_greedy(CONFIG, weights, PROMPT, 4, tp)
        assert torch.equal(again["tokens"], before["tokens"])
        np.testing.assert_allclose(again["logits"].numpy(), before["logits"].numpy(), rtol=1e-5, atol=1e-5)
    wrong = known_bad.kv_shard_by_rank(CONFIG, weights, PROMPT, 4, 4)
    assert not torch.allclose(wrong["logits"], before["logits"], atol=1e-3), "rank 1 of tp 4 reads the other KV head"
    after = qwen3.tp_model_greedy(CONFIG, weights, PROMPT, 4, 4)
    assert torch.equal(after["tokens"], before["tokens"]) and torch.equal(after["logits"], before["logits"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where no CUDA device is present")
def test_the_device_operation_refuses_without_cuda():
    with pytest.raises(RuntimeError, match="model-greedy-on-device needs a CUDA device"):
        qwen3.greedy_on_device(CONFIG, _weights(), PROMPT, 1, "bfloat16")
