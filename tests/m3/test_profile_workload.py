"""MEM-3.8: the profile decoder, its token split and its weight count (on the CPU)."""
from __future__ import annotations

import pytest
import torch

from impl.worker.profile_workload import (DecoderGeometry, build_profile_decoder, profile_run, split_tokens,
                                          weights_bytes)

pytestmark = pytest.mark.cpu


def tiny(**changes: object) -> DecoderGeometry:
    fields = dict(vocab_size=101, hidden_size=64, num_layers=2, num_attention_heads=4, num_kv_heads=2, head_size=16,
                  intermediate_size=96, dtype=torch.bfloat16)
    fields.update(changes)
    return DecoderGeometry(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("tokens, seqs, lengths", [(37, 5, [8, 8, 7, 7, 7]), (3, 8, [1, 1, 1]), (8192, 64, [128] * 64),
                                                   (10, 1, [10])])
def test_tokens_are_spread_over_at_most_max_num_seqs_requests(tokens: int, seqs: int, lengths: list[int]) -> None:
    assert split_tokens(tokens, seqs) == lengths


def test_weights_are_counted_from_the_geometry() -> None:
    g = tiny()
    per_layer = (g.hidden_size * (g.num_attention_heads + 2 * g.num_kv_heads) * g.head_size
                 + g.num_attention_heads * g.head_size * g.hidden_size
                 + g.hidden_size * 2 * g.intermediate_size + g.intermediate_size * g.hidden_size + 2 * g.hidden_size)
    params = 2 * g.vocab_size * g.hidden_size + g.num_layers * per_layer + g.hidden_size
    model = build_profile_decoder(g, "cpu")
    assert weights_bytes(model) == params * 2
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())


def test_profile_run_samples_one_token_per_request_and_is_reproducible() -> None:
    g = tiny()
    first = profile_run(build_profile_decoder(g, "cpu", seed=3), 37, 5)
    again = profile_run(build_profile_decoder(g, "cpu", seed=3), 37, 5)
    assert first.shape == (5,) and first.dtype == torch.int64
    assert bool(((first >= 0) & (first < g.vocab_size)).all())
    assert torch.equal(first, again)


def test_attention_is_causal_within_each_request() -> None:
    model = build_profile_decoder(tiny(dtype=torch.float32), "cpu")
    tokens = torch.arange(12) % 101
    with torch.inference_mode():
        joint = model(tokens, [6, 6])
        alone = model(tokens[:6], [6])
    assert joint[0] == alone[0]  # the second request does not leak into the first


@pytest.mark.parametrize("changes, error, message", [
    (dict(num_kv_heads=3), ValueError, "must be a multiple of num_kv_heads"),
    (dict(num_layers=0), ValueError, r"DecoderGeometry\.num_layers must be an int >= 1, got 0"),
    (dict(hidden_size=True), TypeError, r"DecoderGeometry\.hidden_size must be an int >= 1, got True"),
    (dict(dtype=torch.int8), ValueError, "must be a floating torch.dtype"),
])
def test_invalid_geometry_is_refused(changes: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        tiny(**changes)


def test_token_ids_must_match_the_lengths() -> None:
    model = build_profile_decoder(tiny(), "cpu")
    with pytest.raises(ValueError, match="sum\\(lengths\\) = 7"):
        model(torch.arange(6), [3, 4])


def test_building_leaves_the_callers_random_state_alone() -> None:
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    build_profile_decoder(tiny(), "cpu", seed=1)
    assert torch.equal(torch.rand(3), expected)
