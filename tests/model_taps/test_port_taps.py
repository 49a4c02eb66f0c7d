"""The Python port's decoder-taps (spec/model-taps.md): the taps come from the greedy decode's own layer code, in
forward order, and a feed replaces the residual stream at its feed point and nowhere else."""
from __future__ import annotations

import pytest
import torch

from impl.model_executor.models import qwen3, qwen3_taps
from impl.model_executor.models.taps import NO_TAPS, Recorder
from tests.model_taps.conftest import IDS, TINY

pytestmark = [pytest.mark.cpu, pytest.mark.dist]

LAYER_TAPS = ("attn.in", "attn.k", "attn.v", "attn.out", "mlp.in", "mlp.out", "out")


def _run(weights: dict[str, torch.Tensor], feed: dict | None = None, config: dict = TINY,
         dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """The tapped forward in this process (tp 1: the collectives are no-ops)."""
    checked = qwen3.ModelConfig.from_mapping(config)
    return qwen3_taps.rank_taps(0, 1, qwen3_taps.TapsRun(checked, dict(weights), IDS, dtype, feed or {}))


def test_the_taps_are_named_in_forward_order_with_their_shapes(tiny):
    taps = qwen3_taps.decoder_taps(TINY, tiny, IDS, 1)
    expected = ["embed", *(f"layers.{i}.{tap}" for i in range(2) for tap in LAYER_TAPS), "norm.in", "norm.out", "logits"]
    assert list(taps) == expected
    kv = {name for name in taps if name.endswith(("attn.k", "attn.v"))}
    assert {name: tuple(taps[name].shape) for name in kv} == dict.fromkeys(kv, (8, 16))
    assert tuple(taps["logits"].shape) == (8, 130) and taps["logits"].dtype == torch.float32
    assert all(tuple(value.shape) == (8, 64) for name, value in taps.items() if name not in kv | {"logits"})


def test_the_stream_taps_chain_as_the_residual_adds_say(tiny):
    taps = _run(tiny)
    torch.testing.assert_close(taps["embed"], tiny["model.embed_tokens.weight"][IDS], rtol=0, atol=0)
    for i in range(2):
        p = f"layers.{i}."
        assert torch.equal(taps[p + "mlp.in"], taps[p + "attn.in"] + taps[p + "attn.out"])
        assert torch.equal(taps[p + "out"], taps[p + "mlp.in"] + taps[p + "mlp.out"])
    assert torch.equal(taps["layers.1.attn.in"], taps["layers.0.out"]) and torch.equal(taps["norm.in"], taps["layers.1.out"])


def test_the_last_logits_row_is_the_greedy_steps_logits(tiny):
    taps = qwen3_taps.decoder_taps(TINY, tiny, IDS, 1)
    greedy = qwen3.tp_model_greedy(TINY, tiny, IDS, 1, 1)
    # the same layers; only lm_head's matmul differs (8 rows against 1), a float32 reordering (measured 3.8e-6)
    torch.testing.assert_close(taps["logits"][-1], greedy["logits"][0], rtol=0, atol=2e-5)
    assert int(taps["logits"][-1].argmax()) == int(greedy["tokens"][0])


def test_the_greedy_decode_records_and_feeds_nothing(tiny):
    assert NO_TAPS.taps is None and dict(NO_TAPS.feed) == {}
    model = qwen3.rank_model(qwen3.ModelConfig.from_mapping(TINY), tiny, 1, 0)
    hidden = qwen3.decoder(model, IDS)
    assert torch.equal(hidden, _run(tiny)["norm.in"])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_untapped_forward_gives_the_tapped_ones_logits_alone_bit_for_bit(tiny, dtype):
    untapped = qwen3_taps.decoder_logits(TINY, tiny, IDS, 2, dtype)
    assert list(untapped) == ["logits"] and untapped["logits"].dtype == torch.float32
    assert torch.equal(untapped["logits"], qwen3_taps.decoder_taps(TINY, tiny, IDS, 2, dtype)["logits"])


def test_feeding_a_point_its_own_stream_changes_no_tap(tiny):
    free = _run(tiny)
    fed = _run(tiny, {name: free[name].clone() for name in ("layers.0.mlp.in", "layers.1.attn.in", "norm.in")})
    assert list(fed) == list(free)
    for name in free:
        assert torch.equal(fed[name], free[name]), name


def test_a_feed_replaces_the_stream_there_and_nothing_before_it(tiny):
    free = _run(tiny)
    drawn = torch.randn(8, 64, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 4
    fed = _run(tiny, {"layers.1.attn.in": drawn})
    before = ["embed", *(f"layers.0.{tap}" for tap in LAYER_TAPS)]
    for name in before:
        assert torch.equal(fed[name], free[name]), name
    assert torch.equal(fed["layers.1.attn.in"], drawn.float()), "the fed array, cast to the compute dtype"
    assert not torch.equal(fed["layers.0.out"], fed["layers.1.attn.in"])
    for name in ("layers.1.attn.k", "layers.1.attn.out", "layers.1.out", "logits"):
        assert not torch.allclose(fed[name], free[name], atol=1e-3), name


def test_feeding_the_final_norm_zeros_gives_zero_logits(tiny):
    fed = _run(tiny, {"norm.in": torch.zeros(8, 64)})
    assert torch.equal(fed["norm.out"], torch.zeros(8, 64)) and torch.equal(fed["logits"], torch.zeros(8, 130))


@pytest.mark.parametrize(("dtype", "torch_dtype"), [("bfloat16", torch.bfloat16), ("float16", torch.float16)])
def test_the_dtype_is_the_taps_dtype_and_the_logits_stay_float32(tiny, dtype, torch_dtype):
    taps = qwen3_taps.decoder_taps(TINY, tiny, IDS, 1, dtype)
    assert {name: value.dtype for name, value in taps.items() if name != "logits"} == dict.fromkeys(list(taps)[:-1], torch_dtype)
    assert taps["logits"].dtype == torch.float32


@pytest.mark.parametrize("tp", [2, 4])
def test_tp_gives_rank_0s_taps_alike_with_every_kv_head_once(tiny, tp):
    one, many = qwen3_taps.decoder_taps(TINY, tiny, IDS, 1), qwen3_taps.decoder_taps(TINY, tiny, IDS, tp)
    assert list(many) == list(one)
    for name in one:
        torch.testing.assert_close(many[name], one[name], rtol=1e-5, atol=2e-5, msg=name)


@pytest.mark.parametrize(("feed", "error", "match"), [
    ({"layers.0.attn.out": torch.zeros(8, 64)}, ValueError,
     r"^feed\['layers\.0\.attn\.out'\] is not a feed point of this 2-layer model; feed points: "),
    ({"layers.2.mlp.in": torch.zeros(8, 64)}, ValueError, r"^feed\['layers\.2\.mlp\.in'\] is not a feed point"),
    ({"layers.01.mlp.in": torch.zeros(8, 64)}, ValueError, r"^feed\['layers\.01\.mlp\.in'\] is not a feed point"),
    ({"norm.in": torch.zeros(8, 63)}, ValueError, r"^feed\['norm\.in'\] has shape \[8, 63\], expected \[8, 64\]"),
    ({"norm.in": torch.zeros(8, 64, dtype=torch.int32)}, TypeError, r"^feed\['norm\.in'\] has dtype int32"),
    ({3: torch.zeros(8, 64)}, ValueError, r"^feed\[3\] is not a feed point"),
    ("norm.in", TypeError, r"^feed must be a mapping"),
])
def test_bad_feeds_are_refused_naming_the_key(tiny, feed, error, match):
    with pytest.raises(error, match=match):
        qwen3_taps.decoder_taps(TINY, tiny, IDS, 1, "float32", feed)


@pytest.mark.parametrize(("ids", "dtype", "match"), [
    (torch.tensor([1, 130]), "float32", r"^ids\[1\] = 130 is outside \[0, vocab=130\)$"),
    (torch.zeros(129, dtype=torch.int64), "float32", r"^ids holds 129 tokens, beyond config\.max_position=128$"),
    (IDS, "float64", r"^dtype must be one of float32, bfloat16, float16, got 'float64'$"),
    (IDS, torch.float32, r"^dtype must be one of float32, bfloat16, float16, got torch\.float32$"),
])
def test_bad_ids_and_dtypes_are_refused(tiny, ids, dtype, match):
    with pytest.raises(ValueError, match=match):
        qwen3_taps.decoder_taps(TINY, tiny, ids, 1, dtype)


def test_a_recorder_without_taps_still_feeds():
    stream, fed = torch.ones(2, 3), torch.zeros(2, 3, dtype=torch.float64)
    assert torch.equal(Recorder({"norm.in": fed}).fed("norm.in", stream), torch.zeros(2, 3))
