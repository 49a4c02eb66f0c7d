"""Shrinking a localized break (docs/divergence.md, "The minimal reproduction") on a synthetic decoder whose layer b
breaks from token f on: the search keeps b + 1 layers and the shortest prefix that still breaks at the same tap, in
a fixed order of runs, within its bound; a candidate that cannot be judged is lost, never kept; drift has nothing
to shrink."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pytest

from _vllm_gates.base.errors import GatesError, Location
from _vllm_gates.definitions.model import Taps
from _vllm_gates.taps.divergence import Divergence, localize
from _vllm_gates.taps.divergence_report import render_shrink, shrink_as_json
from _vllm_gates.taps.divergence_shrink import ERROR, KEPT, LOST, not_sought, shrink, truncated
from _vllm_gates.values.policies import Policy

pytestmark = pytest.mark.cpu

H = 8
TAPS = Taps("feed", ("layers.{i}.attn.in", "norm.in"), "layers.{i}.", None, Location("g.yaml", 1, 1))
POLICY = Policy("allclose", rtol=1e-4, atol=1e-5)


def weights(layers: int) -> dict[str, np.ndarray]:
    found = {"model.embed_tokens.weight": np.zeros((4, H)), "model.norm.weight": np.ones(H)}
    for i in range(layers):
        found[f"model.layers.{i}.mlp.up_proj.weight"] = np.full((H, H), float(i))
    return found


def case_input(layers: int, tokens: int) -> dict[str, Any]:
    return {"config": {"layers": layers, "hidden": H}, "weights": weights(layers),
            "ids": np.arange(tokens, dtype=np.int64) % 4, "dtype": "float32"}


class Decoder:
    """A synthetic decoder's localization: its layer ``broken`` (absent in a model of fewer layers) wrong at
    ``tap`` from token ``from_token`` on; records every input it is asked."""

    def __init__(self, broken: int, from_token: int, tap: str = "mlp.out"):
        self.broken, self.from_token, self.tap = broken, from_token, tap
        self.asked: list[Mapping[str, Any]] = []

    def __call__(self, data: Mapping[str, Any]) -> Divergence:
        self.asked.append(data)
        return self.localized(data)

    def localized(self, data: Mapping[str, Any]) -> Divergence:
        layers, tokens = data["config"]["layers"], len(data["ids"])
        rng = np.random.default_rng(layers * 1000 + tokens)
        names = ["embed"] + [f"layers.{i}.{tap}" for i in range(layers) for tap in ("attn.in", "mlp.out", "out")]
        reference = {name: rng.standard_normal((tokens, H)) for name in names + ["norm.in", "norm.out"]}
        port = {name: value.astype(np.float32) for name, value in reference.items()}
        broken = f"layers.{self.broken}.{self.tap}" if self.broken is not None else "norm.out"
        if broken in port:
            port[broken][self.from_token:] += 1.0
        return localize(reference, port, port, TAPS, POLICY)


def test_the_break_keeps_its_layer_and_the_shortest_prefix_in_a_fixed_order_of_runs() -> None:
    decoder = Decoder(broken=2, from_token=5)  # needs layers 0..2 and the sixth token
    data = case_input(6, 20)
    full = decoder.localized(data)
    assert full.broke and full.classification.tap == "layers.2.mlp.out"
    shrunk = shrink(full, data, TAPS.layer, decoder)
    assert shrunk.sought and (shrunk.layers, shrunk.full_layers) == (3, 6)
    assert shrunk.ids == tuple(int(i) for i in data["ids"][:6]) and len(shrunk.full_ids or ()) == 20
    assert [(run.layers, run.tokens, run.outcome) for run in shrunk.runs] == [
        (3, 20, KEPT),  # the fewest layers that hold layer 2, on the whole prompt
        (3, 1, LOST), (3, 2, LOST), (3, 4, LOST), (3, 8, KEPT),  # prefixes doubling until one keeps it
        (3, 6, KEPT), (3, 5, LOST),  # bisected between 4 and 8
    ]
    assert shrunk.divergence is not None and shrunk.divergence.classification.tap == "layers.2.mlp.out"
    assert shrunk.notes == ()
    again = shrink(full, data, TAPS.layer, Decoder(broken=2, from_token=5))
    assert again.runs == shrunk.runs  # deterministic


def test_each_run_cuts_the_layers_and_the_prompt_and_the_full_input_is_never_rerun() -> None:
    decoder = Decoder(broken=1, from_token=0)
    data = case_input(4, 8)
    shrink(decoder.localized(data), data, TAPS.layer, decoder)
    assert [(asked["config"]["layers"], len(asked["ids"])) for asked in decoder.asked] == [(2, 8), (2, 1)]
    first = decoder.asked[0]
    assert sorted(first["weights"]) == ["model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight",
                                        "model.layers.1.mlp.up_proj.weight", "model.norm.weight"]
    assert first["config"] == {"layers": 2, "hidden": H} and first["dtype"] == "float32"
    assert decoder.asked[1]["ids"].dtype == np.int64
    assert data["config"]["layers"] == 4 and len(data["weights"]) == 6 and len(data["ids"]) == 8  # not mutated


def test_truncated_reads_a_weights_layer_by_the_gates_layer_pattern() -> None:
    data = {"config": {"layers": 3}, "ids": np.array([5, 6, 7], dtype=np.int32),
            "weights": {"layers.0.w": 0, "layers.2.w": 2, "model.layers.1.mlp.w": 1, "model.layers.10.w": 10,
                        "lm_head": -1, "players.2.w": 2}}
    cut = truncated(data, "layers.{i}.", 2, (5, 6))
    assert sorted(cut["weights"]) == ["layers.0.w", "lm_head", "model.layers.1.mlp.w", "players.2.w"]
    assert cut["config"] == {"layers": 2} and cut["ids"].tolist() == [5, 6] and cut["ids"].dtype == np.int32
    assert truncated(data, "layers.{i}.", None, (5,))["weights"] is data["weights"]


def test_drift_has_nothing_to_shrink_and_asks_nothing() -> None:
    decoder = Decoder(broken=9, from_token=0)  # no layer 9 in a 4-layer model: drift
    data = case_input(4, 8)
    full = decoder.localized(data)
    shrunk = shrink(full, data, TAPS.layer, decoder)
    assert not full.broke and decoder.asked == []
    assert not shrunk.sought and shrunk.reason == "no localized break: nothing to shrink"
    assert render_shrink(shrunk, full) == ""
    assert shrink_as_json(shrunk)["minimal"] is None and shrink_as_json(shrunk)["full"] == {"layers": 4, "tokens": 8}


def test_the_search_stops_at_its_bound_and_keeps_the_smallest_it_saw() -> None:
    class OnlyWhole(Decoder):  # a break outside the layers that shows only in the whole model
        def localized(self, data: Mapping[str, Any]) -> Divergence:
            return super().localized(data) if data["config"]["layers"] == 30 else Decoder(9, 0).localized(data)

    decoder = OnlyWhole(broken=None, from_token=0)  # type: ignore[arg-type]
    data = case_input(30, 4)
    full = decoder.localized(data)
    assert full.classification.tap == "norm.out" and full.classification.layer is None
    shrunk = shrink(full, data, TAPS.layer, decoder, max_runs=5)
    assert [(run.layers, run.outcome) for run in shrunk.runs] == [(k, LOST) for k in range(1, 6)]
    assert shrunk.layers == 30 and len(shrunk.ids or ()) == 4 and shrunk.divergence is full
    assert shrunk.notes == ("stopped at the bound of 5 runs: a smaller reproduction may exist",)
    assert "  stopped at the bound of 5 runs" in render_shrink(shrunk, full)
    late = Decoder(broken=0, from_token=5)  # one layer: nothing to cut; the bound falls inside the bisection
    data = case_input(1, 20)
    late_full = late.localized(data)
    shrunk = shrink(late_full, data, TAPS.layer, late, max_runs=4)
    assert [(run.tokens, run.outcome) for run in shrunk.runs] == [(1, LOST), (2, LOST), (4, LOST), (8, KEPT)]
    assert len(shrunk.ids or ()) == 8 and shrunk.divergence is not late_full  # the 8-token run's localization
    assert shrunk.divergence is not None and len(shrunk.divergence.taps[0].shape) == 2
    assert shrunk.divergence.taps[0].shape[0] == 8


def test_a_candidate_that_cannot_be_judged_is_lost_with_its_reason_never_kept() -> None:
    class Refusing(Decoder):
        def __call__(self, data: Mapping[str, Any]) -> Divergence:
            if data["config"]["layers"] == 2:
                raise GatesError("the reference example:taps raised ValueError: two layers are refused")
            return super().__call__(data)

    decoder = Refusing(broken=0, from_token=0)
    data = case_input(3, 1)
    shrunk = shrink(decoder.localized(data), data, TAPS.layer, decoder)
    assert [(run.layers, run.tokens, run.outcome) for run in shrunk.runs] == [(1, 1, KEPT)]
    refusing = Refusing(broken=1, from_token=0)
    shrunk = shrink(refusing.localized(data), data, TAPS.layer, refusing)
    assert [(run.layers, run.outcome, run.text) for run in shrunk.runs] == [
        (2, ERROR, "the reference example:taps raised ValueError: two layers are refused")]
    assert shrunk.layers == 3  # the whole model, as the full run showed it


def test_an_input_without_a_layer_count_shrinks_the_prompt_only() -> None:
    decoder = Decoder(broken=1, from_token=2)

    def without_config(data: Mapping[str, Any]) -> Divergence:
        return decoder({**data, "config": {"layers": 3}})

    data = {"ids": np.arange(8, dtype=np.int64), "weights": weights(3)}
    shrunk = shrink(decoder.localized({**data, "config": {"layers": 3}}), data, TAPS.layer, without_config)
    assert shrunk.layers is None and shrunk.ids == (0, 1, 2)
    assert shrunk.notes == ("layers not shrunk: the case's input has no whole config.layers >= 1",)
    assert [run.layers for run in shrunk.runs] == [None] * len(shrunk.runs)
    assert "minimal reproduction: the case's layers, the first 3 tokens of 8 (ids [0, 1, 2])" in shrunk.describe()
    unweighted = {"config": {"layers": 3}, "ids": np.arange(8, dtype=np.int64)}  # a layer count, no weights to cut
    shrunk = shrink(decoder.localized(unweighted), unweighted, TAPS.layer, decoder)
    assert shrunk.layers is None and shrunk.ids == (0, 1, 2) and shrunk.full_layers == 3
    assert shrunk.notes == ("layers not shrunk: the case's input has no 'weights' mapping",)


def test_an_input_without_a_1d_prompt_shrinks_the_layers_only_and_keeps_its_ids() -> None:
    decoder = Decoder(broken=1, from_token=0)
    data = {**case_input(4, 6), "ids": np.zeros((2, 3), dtype=np.int64)}  # a batch: no prefix to cut
    full = decoder.localized({**data, "ids": np.zeros(6)})
    given: list[tuple[int, ...]] = []

    def flat(cut: Mapping[str, Any]) -> Divergence:
        given.append(cut["ids"].shape)
        return decoder({**cut, "ids": np.zeros(6)})

    shrunk = shrink(full, data, TAPS.layer, flat)
    assert given == [(2, 3)]  # the case's ids, as they are
    assert [(run.layers, run.tokens, run.outcome) for run in shrunk.runs] == [(2, None, KEPT)]
    assert shrunk.layers == 2 and shrunk.ids is None
    assert shrunk.notes == ("prompt not shrunk: the case's input has no 1-D integer 'ids' array",)
    assert "minimal reproduction: 2 of 4 layers, the case's prompt: the break at layer 1" in shrunk.describe()
    assert "  2 layers, the case's prompt: kept: " in render_shrink(shrunk, full)
    assert shrink_as_json(shrunk)["minimal"]["ids"] is None


def test_the_text_and_the_json_name_the_minimal_reproduction_and_every_run() -> None:
    decoder = Decoder(broken=1, from_token=1)
    data = case_input(3, 4)
    full = decoder.localized(data)
    shrunk = shrink(full, data, TAPS.layer, decoder)
    text = render_shrink(shrunk, full).splitlines()
    assert text[:4] == ["shrinking: 3 runs (at most 16), the reference re-run on each",
                        "  2 layers, 4 tokens: kept: a localized break at layer 1, tap layers.1.mlp.out",
                        "  2 layers, 1 token: lost: drift, no localized break",
                        "  2 layers, 2 tokens: kept: a localized break at layer 1, tap layers.1.mlp.out"]
    assert text[4] == ("minimal reproduction: 2 of 3 layers, the first 2 tokens of 4 (ids [0, 1]): the break at layer 1, "
                       "tap layers.1.mlp.out")
    assert text[5].startswith("  isolated max abs 1, rel L2 ")
    found = shrink_as_json(shrunk)
    assert found["sought"] and found["reason"] is None and found["full"] == {"layers": 3, "tokens": 4}
    minimal = found["minimal"]
    assert (minimal["layers"], minimal["tokens"], minimal["ids"], minimal["tap"], minimal["layer"]) == \
        (2, 2, [0, 1], "layers.1.mlp.out", 1)
    assert minimal["isolated"]["passed"] is False and minimal["isolated"]["max_abs"] == pytest.approx(1.0)
    assert [run["outcome"] for run in found["runs"]] == [KEPT, LOST, KEPT]
    declined = not_sought("--no-shrink", data)
    assert render_shrink(declined, full) == "minimal reproduction: not sought: --no-shrink\n"
    assert shrink_as_json(declined)["sought"] is False and shrink_as_json(declined)["runs"] == []
