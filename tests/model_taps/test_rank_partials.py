"""The ranks' partials before each all-reduce (spec/model-taps.md MT-1.6, MT-4.4): the port's sum to its reduced
taps, the oracle derives its own from index pieces, the known-good passes with room, and `gates diverge` names the rank
of both rank known-bads."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gates.rows.model_taps import known_bad
from gates.rows.model_taps.known_good import decoder_taps_reordered
from impl.model_executor.models import qwen3_taps
from oracles.qwen3_reference import decoder_taps as oracle_taps
from tests.model_taps.conftest import FOUR, IDS, TINY, as_numpy

pytestmark = [pytest.mark.cpu, pytest.mark.dist]

ROOT = Path(__file__).resolve().parents[2]
NMSE_BOUND = 1e-10  # the gates' bound (gates/rows/model_taps/gate.yaml)


def _nmse(actual: torch.Tensor, expected: np.ndarray) -> float:
    difference = actual.double().numpy() - expected
    return float((difference ** 2).sum() / (expected ** 2).sum())


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_the_ports_partials_come_before_their_reduced_tap_and_sum_to_it(tiny, tp):
    taps = qwen3_taps.decoder_taps(TINY, tiny, IDS, tp, rank_partials=True)
    names = list(taps)
    for reduced in ("layers.1.attn.out", "layers.0.mlp.out"):
        partials = [f"{reduced}.rank{r}" for r in range(tp)]
        assert names[names.index(reduced) - tp:names.index(reduced)] == partials
        total = torch.stack([taps[name] for name in partials]).double().sum(0)
        torch.testing.assert_close(total, taps[reduced].double(), rtol=0, atol=1e-5)
        if tp == 1:
            assert torch.equal(taps[partials[0]], taps[reduced])
    assert sum(".rank" in name for name in names) == 2 * 2 * tp
    assert not any(".rank" in name for name in qwen3_taps.decoder_taps(TINY, tiny, IDS, tp))  # only when asked


def test_rank_partials_must_be_a_bool(tiny):
    with pytest.raises(TypeError, match=r"^rank_partials must be a bool, got 'yes' \(str\)$"):
        qwen3_taps.decoder_taps(TINY, tiny, IDS, 2, rank_partials="yes")


def test_the_oracle_cuts_the_heads_and_ffn_units_into_tp_pieces(four):
    weights = as_numpy(four)
    taps = oracle_taps(FOUR, weights, IDS.numpy(), tp=2, rank_partials=True)
    x = taps["layers.2.mlp.in"]
    normed = x / np.sqrt((x * x).mean(-1, keepdims=True) + FOUR["rms_norm_eps"]) * weights["model.layers.2.post_attention_layernorm.weight"]
    gate = normed @ weights["model.layers.2.mlp.gate_proj.weight"].astype(np.float64).T
    units = gate / (1 + np.exp(-gate)) * (normed @ weights["model.layers.2.mlp.up_proj.weight"].astype(np.float64).T)
    down = weights["model.layers.2.mlp.down_proj.weight"].astype(np.float64)
    np.testing.assert_allclose(taps["layers.2.mlp.out.rank1"], units[:, 32:] @ down[:, 32:].T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(taps["layers.2.attn.out.rank0"] + taps["layers.2.attn.out.rank1"], taps["layers.2.attn.out"],
                               rtol=0, atol=1e-12)
    assert not any(".rank" in name for name in oracle_taps(FOUR, weights, IDS.numpy(), tp=2))


@pytest.mark.parametrize("tp", [1, 2])
def test_the_known_good_is_another_port_within_a_hundredth_of_the_bound(four, tp):
    reference = oracle_taps(FOUR, as_numpy(four), IDS.numpy(), tp=tp, rank_partials=True)
    good = decoder_taps_reordered(FOUR, as_numpy(four), IDS.numpy(), tp, rank_partials=True)
    port = qwen3_taps.decoder_taps(FOUR, four, IDS, tp, rank_partials=True)
    assert list(good) == list(reference)
    worst = max(_nmse(good[name], reference[name]) for name in reference)
    assert worst < NMSE_BOUND / 100, worst  # measured 2.8e-13 (tp 1) and 2.5e-13 (tp 2)
    assert any(not torch.equal(good[name], port[name]) for name in port if name != "embed")  # not the port's bits


def test_the_known_good_refuses_as_the_operation_does(four):
    with pytest.raises(ValueError, match=r"^num_heads=8 is not divisible by tp=3$"):
        decoder_taps_reordered(FOUR, as_numpy(four), IDS.numpy(), 3)
    with pytest.raises(ValueError, match=r"^weights is missing 'lm_head.weight' \(shape \[130, 64\]\)$"):
        decoder_taps_reordered(FOUR, {k: v for k, v in as_numpy(four).items() if k != "lm_head.weight"}, IDS.numpy())


def _diverge(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("PYTEST_", "GATES_"))}
    report = tmp_path / "diverge.json"
    done = subprocess.run([sys.executable, "-m", "_vllm_gates.frontends.cli", "diverge", "MODEL-TAPS", "--gate",
                           "decoder-rank-partials", *args, "--json", str(report)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    return done, (json.loads(report.read_text(encoding="utf-8")) if report.exists() else {})


@pytest.mark.parametrize("name", sorted(known_bad.RANK_FIRST_TAP))
def test_each_rank_defect_is_localized_at_layer_2_and_rank_1(tmp_path: Path, name: str) -> None:
    done, report = _diverge(tmp_path, "--case", "four-layers-tp2-rank-partials", "--known-bad", name)
    tap, rank = known_bad.RANK_FIRST_TAP[name]
    layer = known_bad.PLANTED_LAYER
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"LOCALIZED BREAK at layer {layer}, rank {rank}, tap layers.{layer}.{tap}:" in done.stdout, done.stdout[-3000:]
    found = report["classification"]
    assert (found["layer"], found["rank"], found["tap"]) == (layer, rank, f"layers.{layer}.{tap}")


def test_the_port_at_tp_2_with_its_partials_is_drift(tmp_path: Path) -> None:
    done, report = _diverge(tmp_path, "--case", "four-layers-tp2-rank-partials")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert report["classification"]["kind"] == "drift" and report["classification"]["rank"] is None
    assert max(tap["isolated"]["used"] for tap in report["taps"]) < 0.01


def test_the_hf_reference_refuses_to_answer_without_the_partials(four):
    from upstream import hf_qwen3

    with pytest.raises(ValueError, match=r"^rank_partials=True: transformers' Qwen3 runs unsharded and has no ranks' "):
        hf_qwen3.decoder_taps(FOUR, as_numpy(four), IDS.numpy(), tp=2, rank_partials=True)


def test_the_known_good_reads_torch_tensors_by_their_own_dtype(four):
    weights = dict(four, **{"model.norm.weight": four["model.norm.weight"].double()})
    with pytest.raises(ValueError, match=r"^weights\['model.norm.weight'\] has dtype float64; accepted: float32$"):
        decoder_taps_reordered(FOUR, weights, IDS)
    fed = {"norm.in": torch.ones(8, 64, dtype=torch.bfloat16)}
    assert torch.equal(decoder_taps_reordered(FOUR, four, IDS, feed=fed)["norm.in"], torch.ones(8, 64))
