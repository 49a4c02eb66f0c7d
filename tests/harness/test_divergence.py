"""The localization on synthetic taps (docs/divergence.md): a break at layer 2 found at layer 2 and its tap, drift
with a growing accumulated error, near-tie and confident first divergences, dtype boundaries, the figures, and the
taps that cannot be compared."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from _vllm_gates.base.errors import Location
from _vllm_gates.definitions.model import Taps
from _vllm_gates.taps.divergence import DRIFT, LOCALIZED_BREAK, DivergenceInputError, dtype_boundary, localize
from _vllm_gates.taps.divergence_report import as_json, render_text
from _vllm_gates.taps.tap_figures import figures
from _vllm_gates.values.policies import PerDtype, Policy

pytestmark = pytest.mark.cpu

LAYERS, T, H, V = 4, 5, 16, 32
TAPS = Taps("feed", ("layers.{i}.attn.in", "layers.{i}.mlp.in", "norm.in"), "layers.{i}.", "logits", Location("g.yaml", 1, 1))
POLICY = Policy("allclose", rtol=1e-4, atol=1e-5)
PER_LAYER = ("attn.in", "attn.k", "attn.v", "attn.out", "mlp.in", "mlp.out", "out")


def names() -> list[str]:
    """The taps of DIVERGE.md's decoder, in forward order."""
    found = ["embed"] + [f"layers.{i}.{tap}" for i in range(LAYERS) for tap in PER_LAYER]
    return found + ["norm.in", "norm.out", "logits"]


def reference(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal((T, V if name == "logits" else H)) for name in names()}


def noisy(taps: dict[str, np.ndarray], relative: float | dict[str, float], seed: int = 1,
          dtype: object = np.float32) -> dict[str, np.ndarray]:
    """The taps with relative noise (one share, or a share per tap), cast to ``dtype`` (logits float32)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, value in taps.items():
        share = relative if isinstance(relative, float) else relative.get(name, 0.0)
        moved = value * (1 + share * rng.standard_normal(value.shape))
        out[name] = moved.astype(np.float32 if name == "logits" else dtype)
    return out


def test_a_break_at_layer_2_is_localized_at_layer_2_and_its_tap() -> None:
    ref = reference()
    forced = noisy(ref, 1e-7)
    forced["layers.2.mlp.out"] = (ref["layers.2.mlp.out"] + 0.5).astype(np.float32)  # the MLP of layer 2 is wrong
    forced["layers.2.out"] = (ref["layers.2.out"] + 0.5).astype(np.float32)
    forced["layers.1.mlp.in"] = (ref["layers.1.mlp.in"] + 3.0).astype(np.float32)  # a feed point: what was fed, never a break
    free = noisy(ref, {name: 0.1 for name in names()[names().index("layers.2.mlp.out"):]})  # wrong from there on
    found = localize(ref, free, forced, TAPS, POLICY)
    assert found.broke
    assert (found.classification.kind, found.classification.layer, found.classification.tap) == (LOCALIZED_BREAK, 2, "layers.2.mlp.out")
    assert found.classification.describe().startswith("LOCALIZED BREAK at layer 2, tap layers.2.mlp.out")
    report = dict(found.classification.report)
    assert report["mismatched"] == f"{T * H} of {T * H} elements"
    assert report["max abs error"].startswith("0.5")
    by_name = {tap.name: tap for tap in found.taps}
    assert [tap.name for tap in found.taps] == names()
    assert by_name["layers.1.mlp.in"].feed_point and not by_name["layers.1.mlp.in"].isolated.passed
    assert by_name["layers.2.mlp.out"].layer == 2 and by_name["norm.out"].layer is None
    assert by_name["layers.2.mlp.out"].isolated.figures.max_abs == pytest.approx(0.5, rel=1e-5)


def test_drift_every_isolated_error_within_tolerance_names_where_the_accumulated_error_crosses() -> None:
    ref = reference()
    forced = noisy(ref, 1e-7)
    growing = {}
    for position, name in enumerate(names()):
        growing[name] = 1e-7 * 10 ** (position / 6)  # the accumulated error grows along the forward
    free = noisy(ref, growing, seed=2)
    found = localize(ref, free, forced, TAPS, POLICY)
    assert found.classification.kind == DRIFT and not found.broke
    assert all(tap.isolated.passed for tap in found.taps)
    first_over = next(tap for tap in found.taps if not tap.accumulated.passed)
    assert found.classification.tap == first_over.name and found.classification.layer == first_over.layer
    assert all(tap.accumulated.passed for tap in found.taps[:found.taps.index(first_over)])
    assert f"the accumulated error first crosses the bound at {first_over.name}" in found.classification.describe()
    accumulated = [tap.accumulated.figures.rel_l2 for tap in found.taps]
    assert accumulated[-1] > 1000 * accumulated[0]  # it grows along the forward; isolated stays flat
    assert max(tap.isolated.figures.rel_l2 for tap in found.taps) < 1e-6


def test_drift_within_bounds_throughout() -> None:
    ref = reference()
    found = localize(ref, noisy(ref, 1e-7), noisy(ref, 1e-7, seed=3), TAPS, POLICY)
    assert found.classification.kind == DRIFT and found.classification.tap is None
    assert found.classification.describe().endswith("the accumulated error is within bounds throughout")


def logits_case(margin: float) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Reference taps whose position 2 prefers id 3 over id 7 by ``margin``; an implementation that picks 7 there."""
    ref = reference()
    logits = np.zeros((T, V))
    logits[:, 0] = 5.0
    logits[2, 0], logits[2, 3], logits[2, 7] = 0.0, 2.0, 2.0 - margin
    ref["logits"] = logits
    free = noisy(ref, 1e-7)
    swapped = logits.astype(np.float32)
    swapped[2, 7] = 2.0 + margin
    free["logits"] = swapped
    return ref, free


def test_a_near_tie_first_divergence_is_named_so() -> None:
    ref, free = logits_case(margin=1e-5)
    first = localize(ref, free, noisy(ref, 1e-7), TAPS, POLICY).first_divergence
    assert first is not None and first.position == 2 and (first.reference_id, first.impl_id) == (3, 7)
    assert first.margin == pytest.approx(1e-5) and first.band == pytest.approx(2e-5) and first.near_tie
    assert "(near-tie: the band is 2e-05, 2 x atol 1e-05 for float32)" in first.describe()


def test_a_confident_divergence_without_a_localized_break_is_reported_as_such() -> None:
    ref, free = logits_case(margin=1.0)
    found = localize(ref, free, noisy(ref, 1e-7), TAPS, POLICY)
    first = found.first_divergence
    assert first is not None and first.position == 2 and not first.near_tie and "(confident:" in first.describe()
    assert found.confident_without_break and not found.broke


def test_the_tokens_band_is_the_gates_margin() -> None:
    ref, free = logits_case(margin=0.3)
    tokens = Policy("tokens", margin=0.5, max_excused=1, rtol=1e-4, atol=1e-5)
    first = localize(ref, free, noisy(ref, 1e-7), TAPS, tokens).first_divergence
    assert first is not None and first.near_tie and first.band == 0.5 and first.band_source == "the gate's tokens margin"


def test_an_exact_tie_after_rounding_to_float32_goes_to_the_lowest_id() -> None:
    ref = reference()
    logits = np.zeros((T, V))
    logits[:, 4] = 1.0
    logits[:, 9] = 1.0 + 1e-12  # a float64 reference prefers 9; rounded to float32 the two tie, and 4 wins
    ref["logits"] = logits
    free = noisy(ref, 1e-7)
    free["logits"] = np.where(np.arange(V) == 9, np.float32(1.0), logits.astype(np.float32)).astype(np.float32)
    first = localize(ref, free, noisy(ref, 1e-7), TAPS, POLICY).first_divergence
    assert first is not None and first.position is None
    assert first.describe() == f"logits: the argmax agrees at all {T} positions"


def test_dtype_boundaries_wider_with_its_byte_cost_narrower_as_a_likely_break() -> None:
    wide = dtype_boundary("layers.0.out", np.zeros((T, H), np.float32), np.zeros((T, H), ml_dtypes.bfloat16))
    assert wide is not None and wide.wider and wide.extra_bytes == 2 * T * H
    assert wide.describe() == (f"layers.0.out: float32 where the reference has bfloat16: 2x the bytes ({2 * T * H} "
                               "bytes more)")
    narrow = dtype_boundary("layers.0.out", np.zeros((T, H), ml_dtypes.bfloat16), np.zeros((T, H), np.float32))
    assert narrow is not None and not narrow.wider
    assert narrow.describe() == "layers.0.out: bfloat16 where the reference has float32: likely break"
    assert dtype_boundary("x", np.zeros(3, np.float32), np.zeros(3, np.float64)) is None  # the oracle's float64
    assert dtype_boundary("x", np.zeros(3, np.float32), np.zeros(3, np.float32)) is None


def test_a_bfloat16_reference_against_a_float32_port_is_listed_as_a_boundary() -> None:
    ref = {name: value.astype(ml_dtypes.bfloat16) for name, value in reference().items() if name != "logits"}
    ref["logits"] = reference()["logits"].astype(np.float32)
    port = {name: value.astype(np.float32) for name, value in ref.items()}
    found = localize(ref, port, port, TAPS, POLICY)
    assert len(found.boundaries) == len(names()) - 1  # every tap but the float32 logits
    assert all(boundary.wider and boundary.ratio == 2 for boundary in found.boundaries)
    assert not found.broke and found.classification.tap is None  # a float32 copy of bfloat16 values is exact


def test_a_tap_one_side_lacks_is_listed_with_the_names_the_other_reports() -> None:
    ref = reference()
    free = noisy(ref, 1e-7)
    del free["layers.3.mlp.out"]
    with pytest.raises(DivergenceInputError) as error:
        localize(ref, free, noisy(ref, 1e-7), TAPS, POLICY)
    text = str(error.value)
    assert "the implementation's free-running run lacks layers.3.mlp.out" in text
    assert "the reference reports embed, layers.0.attn.in" in text and "and 12 more;" in text  # 32 taps, 20 shown
    assert "the implementation's free-running run reports embed" in text and text.endswith("and 11 more)")
    extra = noisy(ref, 1e-7)
    extra["layers.9.out"] = extra["embed"]
    with pytest.raises(DivergenceInputError, match="the reference lacks layers.9.out"):
        localize(ref, noisy(ref, 1e-7), extra, TAPS, POLICY)


def test_taps_of_different_shapes_are_an_error_naming_both() -> None:
    ref = reference()
    forced = noisy(ref, 1e-7)
    forced["layers.1.attn.k"] = forced["layers.1.attn.k"][:, :8]
    with pytest.raises(DivergenceInputError) as error:
        localize(ref, noisy(ref, 1e-7), forced, TAPS, POLICY)
    assert str(error.value) == (f"tap layers.1.attn.k: shape [{T}, 8] in the implementation's teacher-forced run, "
                                f"[{T}, {H}] in the reference")


@pytest.mark.parametrize("dtype", [np.int64, np.bool_])
def test_a_tap_of_a_dtype_that_is_not_the_references_kind_is_an_error_naming_both(dtype: object) -> None:
    ref = reference()
    free, forced = noisy(ref, 1e-7), noisy(ref, 1e-7)
    free["layers.1.attn.k"] = free["layers.1.attn.k"].astype(dtype)
    forced["layers.1.attn.k"] = forced["layers.1.attn.k"].astype(dtype)
    with pytest.raises(DivergenceInputError) as error:  # rounding the reference to int64 would make it pass
        localize(ref, free, forced, TAPS, POLICY)
    name = np.dtype(dtype).name
    assert str(error.value) == (f"tap layers.1.attn.k: dtype {name} in the implementation's free-running run, float64 "
                                f"in the reference: a float tap is compared with a float one (bfloat16, float16, "
                                f"float32, float64), any other only with its own dtype")


def test_a_tap_the_implementation_reports_in_two_dtypes_is_an_error_naming_both() -> None:
    ref = reference()
    forced = noisy(ref, 1e-7)
    forced["layers.2.mlp.out"] = forced["layers.2.mlp.out"].astype(ml_dtypes.bfloat16)
    with pytest.raises(DivergenceInputError) as error:
        localize(ref, noisy(ref, 1e-7), forced, TAPS, POLICY)
    assert str(error.value) == ("tap layers.2.mlp.out: dtype float32 in the implementation's free-running run, bfloat16 "
                                "in its teacher-forced run")


def test_logits_that_are_not_t_by_v_are_refused() -> None:
    ref = reference()
    ref["logits"] = ref["logits"][:, :1]
    port = noisy(ref, 1e-7)
    with pytest.raises(DivergenceInputError, match=r"the logits tap 'logits' has shape \[5, 1\]"):
        localize(ref, port, port, TAPS, POLICY)


def test_the_figures_max_abs_rms_relative_l2_and_cosine() -> None:
    expected = np.array([3.0, 4.0, 0.0, 0.0])
    found = figures(expected + np.array([0.0, 0.0, 1.0, -1.0]), expected)
    assert found.max_abs == 1.0
    assert found.rms == pytest.approx(math.sqrt(2 / 4))
    assert found.rel_l2 == pytest.approx(math.sqrt(2) / 5)
    assert found.cosine == pytest.approx(25 / (5 * math.sqrt(27)))
    assert figures(np.array([0.0, 1.0]), np.array([1.0, 0.0])).cosine == pytest.approx(0.0)
    assert figures(-expected, expected).cosine == pytest.approx(-1.0)


def test_the_figures_are_scaled_so_tiny_and_huge_values_neither_underflow_nor_overflow() -> None:
    for scale in (1e-200, 1e200):
        expected = np.array([3.0, 4.0]) * scale
        found = figures(expected * (1 + 1e-3), expected)
        assert found.rel_l2 == pytest.approx(1e-3) and found.cosine == pytest.approx(1.0)
        assert found.rms == pytest.approx(scale * 1e-3 * math.sqrt((9 + 16) / 2))


def test_non_finite_differences_are_counted_and_make_max_abs_infinite() -> None:
    found = figures(np.array([1.0, np.nan, np.inf, 2.0]), np.array([1.0, 0.0, np.inf, 2.0]))
    assert found.non_finite == 1 and found.max_abs == math.inf and found.rel_l2 == 0.0


def test_a_tap_its_policy_cannot_judge_is_an_error_never_a_break() -> None:
    ref = reference()
    port = noisy(ref, 1e-7)
    float64_only = Policy("nmse", max=PerDtype((("float64", 1e-12),)))
    with pytest.raises(DivergenceInputError, match=r"tap embed: .*a float32 array, and the nmse policy's max names no "
                                                   r"bound for float32"):
        localize(ref, port, port, TAPS, float64_only)


def test_the_text_names_a_confident_divergence_without_a_break_and_the_boundaries() -> None:
    ref, free = logits_case(margin=1.0)
    ref["layers.0.out"] = ref["layers.0.out"].astype(ml_dtypes.bfloat16)
    text = render_text(localize(ref, free, noisy(ref, 1e-7), TAPS, POLICY), "title")
    assert text.startswith("title\ntolerance: allclose (float32: rtol 0.0001, atol 1e-05)\n")
    assert "a confident divergence with no localized break" in text
    assert f"dtype boundaries:\n  layers.0.out: float32 where the reference has bfloat16: 2x the bytes ({2 * T * H} bytes more)" in text
    row = next(line for line in text.splitlines() if line.startswith("layers.0.out "))
    assert "float32 (ref bfloat16)" in row and row.endswith(" over")  # the port kept float32 values: over bfloat16's rounding


def test_the_json_report_writes_non_finite_figures_as_strings() -> None:
    ref = reference()
    free = noisy(ref, 1e-7)
    free["norm.out"] = free["norm.out"].copy()
    free["norm.out"][0, 0] = np.inf
    found = as_json(localize(ref, free, noisy(ref, 1e-7), TAPS, POLICY), {"row": "R"})
    norm = next(tap for tap in found["taps"] if tap["name"] == "norm.out")
    assert norm["accumulated"]["max_abs"] == "inf" and norm["accumulated"]["non_finite"] == 1
    assert norm["verdict"] == "over" and found["classification"]["tap"] == "norm.out" and found["row"] == "R"
    assert found["format"] == "vllm-gates/diverge/1"
