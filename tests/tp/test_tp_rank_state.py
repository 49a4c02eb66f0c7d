"""The Python tp-layer-ranks of impl/model_executor/layers/tp_rank_state.py (spec/tensor-parallel.md TP-5.7): each
rank's held block, bias and partials are the ones its reduced layer operation sums, and bad inputs are refused as
the contract words them."""
from __future__ import annotations

import re

import pytest
import torch

from impl.model_executor.layers.tp_operations import tp_row_linear
from impl.model_executor.layers.tp_rank_state import tp_layer_ranks

pytestmark = [pytest.mark.cpu, pytest.mark.dist]


def _row_inputs() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(37)
    return {"x": torch.randn(3, 8, generator=generator), "weight": torch.randn(4, 8, generator=generator),
            "bias": torch.randn(4, generator=generator)}


def test_a_tp2_row_layer_holds_its_columns_adds_the_bias_on_rank_0_and_its_partials_sum_to_the_reduced_output():
    inputs = _row_inputs()
    ranks = tp_layer_ranks("row", inputs, 2)
    assert len(ranks) == 2 and all(set(rank) == {"held", "bias", "partials", "mask"} for rank in ranks)
    held = ranks[1]["held"]["weight"]
    assert held["parts"] == [{"source": "weight", "rows": [0, 4], "cols": [4, 8]}] and held["padding_rows"] == 0
    assert torch.equal(held["tensor"], inputs["weight"][:, 4:])
    assert ranks[0]["bias"]["parts"] == [{"source": "bias", "rows": [0, 4]}]
    assert torch.equal(ranks[0]["bias"]["tensor"], inputs["bias"]) and ranks[1]["bias"] is None
    assert ranks[0]["mask"] is None and ranks[1]["mask"] is None
    reduced = tp_row_linear(inputs["x"], inputs["weight"], inputs["bias"], 2)[0]
    torch.testing.assert_close(ranks[0]["partials"]["out"] + ranks[1]["partials"]["out"], reduced)
    expected_1 = inputs["x"][:, 4:] @ inputs["weight"][:, 4:].T  # no bias on rank 1
    torch.testing.assert_close(ranks[1]["partials"]["out"], expected_1)


def test_an_embedding_rank_masks_the_ids_outside_its_loaded_rows():
    weight = torch.randn(130, 4, generator=torch.Generator().manual_seed(5))
    ids = torch.tensor([0, 64, 129])
    ranks = tp_layer_ranks("embedding", {"ids": ids, "weight": weight}, 3)
    assert [rank["held"]["weight"]["parts"][0]["rows"] for rank in ranks] == [[0, 64], [64, 128], [128, 130]]
    assert [rank["held"]["weight"]["padding_rows"] for rank in ranks] == [0, 0, 62]
    assert [rank["mask"].tolist() for rank in ranks] == [[True, False, False], [False, True, False],
                                                          [False, False, True]]
    assert torch.equal(ranks[2]["partials"]["rows"][2], weight[129]) and not ranks[2]["partials"]["rows"][:2].any()


@pytest.mark.parametrize(("layer", "inputs", "tp", "error", "message"), [
    ("conv", {}, 2, ValueError,
     "tp-layer-ranks: layer must be one of column, row, qkv, mlp, embedding, lm_head, got 'conv'"),
    ("row", {**_row_inputs(), "w": 1}, 2, ValueError, "tp-layer-ranks: inputs of layer row: unknown key 'w'"),
    ("row", {"x": _row_inputs()["x"], "weight": _row_inputs()["weight"]}, 2, ValueError,
     "tp-layer-ranks: inputs of layer row: missing key 'bias'"),
    ("row", {"x": torch.zeros(2, 60), "weight": torch.zeros(8, 60), "bias": None}, 8, ValueError,
     "tp-row-linear: in=60 is not divisible by tp=8"),
    ("row", _row_inputs(), 9, ValueError,
     "tp-row-linear: tp must be an int in [1, 8] (the largest gloo world this port starts), got 9"),
])
def test_bad_inputs_are_refused_before_any_rank_starts(layer, inputs, tp, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        tp_layer_ranks(layer, inputs, tp)
