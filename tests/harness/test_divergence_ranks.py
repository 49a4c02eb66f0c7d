"""A localized break's rank (docs/divergence.md, "Per-rank taps"): a rank's wrong partial, the rank whose partial
a reduce lost, a reduce that is wrong with every partial right, and no rank where the gate names no suffix."""
from __future__ import annotations

import numpy as np
import pytest

from _vllm_gates.base.errors import Location
from _vllm_gates.definitions.model import Taps
from _vllm_gates.taps.divergence import localize
from _vllm_gates.taps.divergence_report import as_json, render_text
from _vllm_gates.values.policies import Policy

pytestmark = pytest.mark.cpu

T, H, TP = 5, 16, 3
TAPS = Taps("feed", ("layers.{i}.attn.in",), "layers.{i}.", None, Location("g.yaml", 1, 1), ".rank{r}")
POLICY = Policy("nmse", max=1e-10)


def reference(seed: int = 0) -> dict[str, np.ndarray]:
    """Two layers, each: its input (a feed point), TP partials of attn.out in rank order, then attn.out, their sum."""
    rng = np.random.default_rng(seed)
    taps = {}
    for layer in range(2):
        taps[f"layers.{layer}.attn.in"] = rng.standard_normal((T, H))
        partials = [rng.standard_normal((T, H)) for _ in range(TP)]
        taps.update({f"layers.{layer}.attn.out.rank{r}": partial for r, partial in enumerate(partials)})
        taps[f"layers.{layer}.attn.out"] = np.sum(partials, axis=0)
    return taps


def ported(taps: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: value.astype(np.float32) for name, value in taps.items()}


def test_a_reduce_that_lost_rank_1s_partial_is_rank_1s() -> None:
    ref = reference()
    port = ported(ref)
    port["layers.1.attn.out"] = (ref["layers.1.attn.out.rank0"] + ref["layers.1.attn.out.rank2"]).astype(np.float32)
    found = localize(ref, port, port, TAPS, POLICY)
    assert (found.classification.tap, found.classification.layer, found.classification.rank) == ("layers.1.attn.out", 1, 1)
    assert found.classification.describe().startswith("LOCALIZED BREAK at layer 1, rank 1, tap layers.1.attn.out:")
    text = render_text(found, "t")
    assert ("  ranks: rank 1's partial is missing from the reduce: layers.1.attn.out is the sum of the other ranks' "
            "partials (layers.1.attn.out.rank0, layers.1.attn.out.rank2), each within tolerance") in text
    report = as_json(found, {})["classification"]
    assert report["rank"] == 1 and report["ranks"].startswith("rank 1's partial is missing")


def test_a_wrong_partial_is_its_ranks_break() -> None:
    ref = reference()
    port = ported(ref)
    port["layers.0.attn.out.rank2"] = (ref["layers.0.attn.out.rank2"] * 1.01).astype(np.float32)
    port["layers.0.attn.out"] = (ref["layers.0.attn.out"] + 0.01 * ref["layers.0.attn.out.rank2"]).astype(np.float32)
    found = localize(ref, port, port, TAPS, POLICY)
    assert (found.classification.tap, found.classification.rank) == ("layers.0.attn.out.rank2", 2)
    assert found.classification.ranks.text == "rank 2's partial of layers.0.attn.out, before the reduce, is wrong"


def test_a_reduce_wrong_with_every_partial_right_names_no_rank() -> None:
    ref = reference()
    port = ported(ref)
    port["layers.0.attn.out"] = (2 * ref["layers.0.attn.out"]).astype(np.float32)  # every partial counted twice
    found = localize(ref, port, port, TAPS, POLICY)
    assert (found.classification.tap, found.classification.rank) == ("layers.0.attn.out", None)
    assert found.classification.ranks.text.startswith("the reduce is wrong: layers.0.attn.out is neither the sum")
    assert found.classification.describe().startswith("LOCALIZED BREAK at layer 0, tap layers.0.attn.out:")


def test_a_reduced_tap_that_sums_its_partials_names_no_rank() -> None:
    ref = reference()
    port = ported(ref)
    port["layers.0.attn.out.rank0"] = (ref["layers.0.attn.out.rank0"] + 1e-3).astype(np.float32)
    port["layers.0.attn.out"] = (ref["layers.0.attn.out"] + 1e-3).astype(np.float32)
    ref_shifted = dict(ref, **{"layers.0.attn.out.rank0": ref["layers.0.attn.out.rank0"] + 1e-3})
    found = localize(ref_shifted, port, port, TAPS, POLICY)  # the partials pass; the reduced tap is off by 1e-3
    assert (found.classification.tap, found.classification.rank) == ("layers.0.attn.out", None)
    assert found.classification.ranks.text.startswith("layers.0.attn.out is the sum of the ranks' partials")


def test_without_a_rank_suffix_the_break_names_no_rank() -> None:
    ref = reference()
    port = ported(ref)
    port["layers.1.attn.out"] = (ref["layers.1.attn.out.rank0"] + ref["layers.1.attn.out.rank2"]).astype(np.float32)
    plain = Taps(TAPS.feed, TAPS.feed_points, TAPS.layer, None, TAPS.location)
    found = localize(ref, port, port, plain, POLICY)
    assert found.classification.ranks is None and found.classification.rank is None
    assert "ranks:" not in render_text(found, "t") and as_json(found, {})["classification"]["rank"] is None
