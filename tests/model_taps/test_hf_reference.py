"""HF transformers' Qwen3ForCausalLM as a reference of decoder-taps (upstream/hf_qwen3.py) on a generated 3-layer
checkpoint: the taps' names, shapes and dtypes; float32 logits against the float64 oracle; K after k_norm and RoPE;
the residual taps' sums; the feed's semantics; transformers' own greedy generate picking the logits tap's argmax;
the refusals. Skipped with the reason where transformers of the pinned series is not installed."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import oracles.qwen3_reference as oracle
from gates.rows.model_taps.make_checkpoint import Geometry, load_checkpoint, write_checkpoint
from upstream import hf_qwen3
from upstream.hf_qwen3 import decoder_taps

REASON = hf_qwen3.unavailable_reason()
needs_hf = pytest.mark.skipif(REASON is not None, reason=REASON or "")

GEOMETRY = Geometry(layers=3, hidden=64, num_heads=8, num_kv_heads=2, head_dim=8, ffn=128, vocab=160)
PROMPT = np.array([3, 159, 64, 0, 77, 120, 17, 101], dtype=np.int64)
STEPS = 12
SUB_BLOCK = ("attn.in", "attn.k", "attn.v", "attn.out", "mlp.in", "mlp.out", "out")
NAMES = ["embed", *(f"layers.{i}.{tap}" for i in range(3) for tap in SUB_BLOCK), "norm.in", "norm.out", "logits"]
# float32 against the float64 oracle: a logit is a 64-term dot product of a normed hidden state with an lm_head row
# after ~30 rounded float32 steps of values up to ~20: measured 1.2e-5 at most (logits up to 12); rtol and atol as
# tp-model-greedy's float32 bound (gates/rows/backend_distributed_tp/w2_model.yaml).
RTOL, ATOL = 1.3e-6, 5e-5


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory = write_checkpoint(GEOMETRY, 1, tmp_path_factory.mktemp("qwen3-3l"))
    return (directory, *load_checkpoint(directory))


@pytest.fixture(scope="module")
def decoded(checkpoint):
    """The float64 oracle's greedy decode and the sequence whose positions len(PROMPT)-1.. it scored."""
    _, config, weights = checkpoint
    reference = oracle.greedy_reference(config, weights, PROMPT, STEPS)
    return reference, np.concatenate([PROMPT, reference["tokens"][:-1]])


@pytest.fixture(scope="module")
def free(checkpoint, decoded):
    """HF's free-running taps over the decoded sequence in each compute dtype."""
    if REASON is not None:
        pytest.skip(REASON)
    _, config, weights = checkpoint
    return {dtype: decoder_taps(config, weights, decoded[1], dtype=dtype) for dtype in ("float32", "bfloat16", "float16")}


def _changed(first, second):
    return {name for name in first if not np.array_equal(first[name], second[name])}


def _rms(x, weight, eps=1e-6):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def test_a_missing_or_other_transformers_is_a_reason_and_refused(monkeypatch, checkpoint):
    for version, said in ((None, "transformers is not installed"), ("5.20.2", "transformers 5.20.2 is installed")):
        monkeypatch.setattr(hf_qwen3, "installed_version", lambda version=version: version)
        assert said in hf_qwen3.unavailable_reason()
        with pytest.raises(ImportError, match=said):
            decoder_taps(checkpoint[1], checkpoint[2], PROMPT)


@needs_hf
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_taps_in_forward_order_with_their_shapes_and_dtypes(free, decoded, dtype):
    taps, tokens = free[dtype], len(decoded[1])
    assert list(taps) == NAMES
    widths = {"attn.k": 16, "attn.v": 16, "logits": 160}
    assert {name: taps[name].shape for name in NAMES} == \
        {name: (tokens, widths.get(name.split(".", 2)[-1], widths.get(name, 64))) for name in NAMES}
    compute = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    assert {name: taps[name].dtype for name in NAMES} == \
        {name: np.dtype("float32") if name == "logits" else compute for name in NAMES}


@needs_hf
def test_float32_logits_agree_with_the_float64_oracle(free, decoded):
    reference, _ = decoded
    scored = free["float32"]["logits"][len(PROMPT) - 1:]
    np.testing.assert_allclose(scored, reference["logits"], rtol=RTOL, atol=ATOL)
    assert np.array_equal(np.argmax(scored, axis=1), reference["tokens"])


@needs_hf
@pytest.mark.parametrize(("dtype", "low", "high"), [("bfloat16", 1e-3, 0.05), ("float16", 1e-4, 0.01)])
def test_a_narrow_dtype_is_computed_in_it(free, decoded, dtype, low, high):
    """Its logits carry that dtype's error, not float32's: every weight was cast (relative L2 error measured: 2.1%
    in bfloat16, 0.28% in float16)."""
    reference, _ = decoded
    scored = free[dtype]["logits"][len(PROMPT) - 1:]
    error = np.linalg.norm(scored - reference["logits"]) / np.linalg.norm(reference["logits"])
    assert low < error < high


@needs_hf
@pytest.mark.skipif(not hasattr(oracle, "decoder_taps"), reason="oracles.qwen3_reference has no decoder_taps yet")
def test_every_float32_tap_agrees_with_the_float64_oracle(checkpoint, free, decoded):
    """Measured: relative L2 error under 1e-6 at every tap (float32 rounding, accumulated over 3 layers)."""
    _, config, weights = checkpoint
    reference = oracle.decoder_taps(config=config, weights=weights, ids=decoded[1], tp=1, dtype="float32", feed={})
    assert list(reference) == NAMES
    for name in NAMES:
        ours, theirs = free["float32"][name].astype(np.float64), np.asarray(reference[name], dtype=np.float64)
        assert np.linalg.norm(ours - theirs) <= 1e-5 * np.linalg.norm(theirs), name


@needs_hf
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_the_residual_taps_are_the_sums_transformers_computed(free, dtype):
    taps = free[dtype]
    for index in range(3):
        at = f"layers.{index}."
        assert np.array_equal(taps[at + "mlp.in"], taps[at + "attn.in"] + taps[at + "attn.out"])
        assert np.array_equal(taps[at + "out"], taps[at + "mlp.in"] + taps[at + "mlp.out"])
        if index:
            assert np.array_equal(taps[at + "attn.in"], taps[f"layers.{index - 1}.out"])
    assert np.array_equal(taps["norm.in"], taps["layers.2.out"])


@needs_hf
def test_k_is_read_after_k_norm_and_rope_and_v_as_projected(checkpoint, free):
    """Layer 1's K and V recomputed in float64 from its attn.in tap: k_norm per head, then RoPE as rotate-half
    (x·cos + rotate_half(x)·sin, angle p·theta^(-2j/D)); the un-rotated K differs from the tap after position 0."""
    _, config, weights = checkpoint
    taps, p = free["float32"], "model.layers.1."
    w = {name: weights[p + name].astype(np.float64) for name in ("input_layernorm.weight", "self_attn.k_proj.weight",
                                                                  "self_attn.v_proj.weight", "self_attn.k_norm.weight")}
    x = _rms(taps["layers.1.attn.in"].astype(np.float64), w["input_layernorm.weight"])
    tokens = x.shape[0]
    k = _rms((x @ w["self_attn.k_proj.weight"].T).reshape(tokens, 2, 8), w["self_attn.k_norm.weight"])
    angle = np.arange(tokens)[:, None] * 10000.0 ** (-np.arange(4) * 2.0 / 8)
    cos, sin = np.tile(np.cos(angle), 2)[:, None, :], np.tile(np.sin(angle), 2)[:, None, :]
    rotated = k * cos + np.concatenate([-k[..., 4:], k[..., :4]], axis=-1) * sin
    np.testing.assert_allclose(taps["layers.1.attn.k"], rotated.reshape(tokens, 16), rtol=1e-5, atol=1e-5)
    assert not np.allclose(taps["layers.1.attn.k"][1:], k.reshape(tokens, 16)[1:], atol=1e-2)
    np.testing.assert_allclose(taps["layers.1.attn.v"], x @ w["self_attn.v_proj.weight"].T, rtol=1e-5, atol=1e-5)


@needs_hf
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("point", ["layers.1.attn.in", "layers.1.mlp.in", "norm.in"])
def test_feeding_the_free_running_value_reproduces_every_tap(checkpoint, free, decoded, dtype, point):
    """Bit for bit: at mlp.in this proves the fed layer's forward is Qwen3DecoderLayer.forward's own arithmetic."""
    _, config, weights = checkpoint
    fed = decoder_taps(config, weights, decoded[1], dtype=dtype, feed={point: free[dtype][point]})
    assert list(fed) == NAMES
    assert _changed(fed, free[dtype]) == set()


@needs_hf
@pytest.mark.parametrize(("point", "kept"), [
    ("layers.1.attn.in", NAMES[:8]),
    ("layers.1.mlp.in", NAMES[:12]),
    ("norm.in", NAMES[:-3]),
])
def test_feeding_another_value_changes_the_taps_from_the_feed_point_on(checkpoint, free, decoded, point, kept):
    """What runs before the feed point keeps its values (layer 1's attention too, when its MLP is fed); the feed
    point reports the fed value, rounded to float32 once; every tap after it changes."""
    _, config, weights = checkpoint
    other = free["float32"][point].astype(np.float64) + np.random.default_rng(0).normal(0, 0.5, (len(decoded[1]), 64))
    fed = decoder_taps(config, weights, decoded[1], feed={point: other})
    start = NAMES.index(point)
    assert set(kept) == set(NAMES[:start])
    assert _changed(fed, free["float32"]) == set(NAMES[start:])
    assert np.array_equal(fed[point], other.astype(np.float32))
    if point == "layers.1.mlp.in":
        assert np.array_equal(fed["layers.1.out"], fed[point] + fed["layers.1.mlp.out"])


@needs_hf
def test_a_feed_is_cast_to_the_compute_dtype(checkpoint, free, decoded):
    _, config, weights = checkpoint
    wide = free["float32"]["layers.2.attn.in"].astype(np.float64) * 1.001
    fed = decoder_taps(config, weights, decoded[1], dtype="bfloat16", feed={"layers.2.attn.in": wide})
    assert fed["layers.2.attn.in"].dtype == ml_dtypes.bfloat16
    assert np.array_equal(fed["layers.2.attn.in"], wide.astype(np.float32).astype(ml_dtypes.bfloat16))


@needs_hf
def test_transformers_greedy_generate_picks_the_argmax_of_the_logits_tap(checkpoint, free, decoded):
    """transformers' own loader and generate (eager attention, do_sample off) on the checkpoint directory: the
    tokens are the logits tap's argmax at each scored position, and its forward's logits are the tap's bit for bit."""
    import torch
    from transformers import Qwen3ForCausalLM

    directory, _, _ = checkpoint
    model = Qwen3ForCausalLM.from_pretrained(directory, attn_implementation="eager").eval()
    with torch.no_grad():
        prompt = torch.from_numpy(PROMPT)[None]  # id 0 is in it: the mask is given, not inferred from a pad id
        generated = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=STEPS,
                                   do_sample=False, pad_token_id=0)[0, len(PROMPT):].numpy()
        logits = model(torch.from_numpy(decoded[1])[None]).logits[0].numpy()
    scored = free["float32"]["logits"][len(PROMPT) - 1:]
    assert np.array_equal(generated, np.argmax(scored, axis=1))
    assert np.array_equal(generated, decoded[0]["tokens"])
    assert np.array_equal(logits, free["float32"]["logits"])


@needs_hf
def test_a_tied_checkpoint_reads_lm_head_from_the_embedding(tmp_path):
    directory = write_checkpoint(Geometry(**{**GEOMETRY.config(), "tie_word_embeddings": True}), 2, tmp_path)
    config, weights = load_checkpoint(directory)
    reference = oracle.greedy_reference(config, weights, PROMPT, 1)
    taps = decoder_taps(config, weights, PROMPT)
    np.testing.assert_allclose(taps["logits"][-1], reference["logits"][0], rtol=RTOL, atol=ATOL)
    with pytest.raises(ValueError, match=r"unknown tensor 'lm_head\.weight' \(tie_word_embeddings is true"):
        decoder_taps(config, {**weights, "lm_head.weight": weights["model.embed_tokens.weight"]}, PROMPT)


@needs_hf
@pytest.mark.parametrize(("change", "error", "message"), [
    ({"feed": {"layers.3.attn.in": np.zeros((8, 64))}}, ValueError,
     r"^feed has an unknown feed point 'layers\.3\.attn\.in'; the feed points are .* for i in \[0, 3\), and norm\.in$"),
    ({"feed": {"layers.0.mlp.out": np.zeros((8, 64))}}, ValueError, r"unknown feed point 'layers\.0\.mlp\.out'"),
    ({"feed": {"embed": np.zeros((8, 64))}}, ValueError, r"unknown feed point 'embed'"),
    ({"feed": {"norm.in": np.zeros((7, 64))}}, ValueError,
     r"^feed\['norm\.in'\] has shape \[7, 64\], expected \[8, 64\] \(ids x hidden\)$"),
    ({"feed": {"norm.in": [[0.0] * 64] * 8}}, TypeError, r"^feed\['norm\.in'\] must be a tensor"),
    ({"dtype": "float64"}, ValueError, r"^dtype must be one of float32, bfloat16, float16, got 'float64'$"),
    ({"tp": 0}, ValueError, r"^tp must be a whole number >= 1, got 0$"),
    ({"ids": np.array([1, 160])}, ValueError, r"^ids\[1\] = 160 is outside \[0, vocab=160\)$"),
    ({"ids": np.array([1.0, 2.0])}, ValueError, r"^ids must be a non-empty int64 tensor \[T\], got float64"),
])
def test_bad_input_is_refused_naming_it(checkpoint, change, error, message):
    _, config, weights = checkpoint
    with pytest.raises(error, match=message):
        decoder_taps(**{"config": config, "weights": weights, "ids": PROMPT, **change})


@needs_hf
def test_weights_are_loaded_strictly_by_name(checkpoint):
    _, config, weights = checkpoint
    missing = {name: tensor for name, tensor in weights.items() if name != "model.layers.2.mlp.up_proj.weight"}
    with pytest.raises(ValueError, match=r"^weights is missing 'model\.layers\.2\.mlp\.up_proj\.weight' \(shape "
                                         r"\[128, 64\]\)$"):
        decoder_taps(config, missing, PROMPT)
    with pytest.raises(ValueError, match=r"^weights has an unknown tensor 'model\.layers\.0\.self_attn\.q_proj\.bias'$"):
        decoder_taps(config, {**weights, "model.layers.0.self_attn.q_proj.bias": np.zeros(64, np.float32)}, PROMPT)
    with pytest.raises(ValueError, match=r"^weights\['model\.norm\.weight'\] has shape \[63\], expected \[64\]$"):
        decoder_taps(config, {**weights, "model.norm.weight": np.ones(63, np.float32)}, PROMPT)
    with pytest.raises(ValueError, match=r"^config has unknown fields \['rope_scaling'\] and lacks \[\]"):
        decoder_taps({**config, "rope_scaling": None}, weights, PROMPT)
    with pytest.raises(ValueError, match=r"^config\.rope_theta must be a finite number >= 1\.0, got '1e4'$"):
        decoder_taps({**config, "rope_theta": "1e4"}, weights, PROMPT)
    with pytest.raises(ValueError, match=r"^config\.num_kv_heads must be a whole number >= 1, got 0$"):
        decoder_taps({**config, "num_kv_heads": 0}, weights, PROMPT)
    with pytest.raises(ValueError, match=r"^config\.num_heads=8 must be a multiple of config\.num_kv_heads=3"):
        decoder_taps({**config, "num_kv_heads": 3}, weights, PROMPT)
