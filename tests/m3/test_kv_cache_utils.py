"""MEM-3.6 / MEM-3.7: the fit check, its messages and the maximum-length estimate."""
from __future__ import annotations

import pytest
import torch

from impl.v1.core.kv_cache_utils import (NO_AVAILABLE_MEMORY_MESSAGE, check_enough_kv_cache_memory,
                                         estimate_max_model_len, max_memory_usage_bytes, null_block_bytes)
from impl.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec

pytestmark = pytest.mark.cpu
GiB = 1 << 30


def vllm_test_model() -> dict[str, FullAttentionSpec]:
    """tests/v1/core/test_kv_cache_utils.py::test_estimate_max_model_len: 32 x (32 KV heads, 128, fp16, block 16)."""
    spec = FullAttentionSpec(block_size=16, num_kv_heads=32, head_size=128, dtype=torch.float16)
    return {f"layer_{i}": spec for i in range(32)}


@pytest.mark.parametrize("max_model_len, estimated", [(16385, 16384), (16383, 16383)])
def test_vllms_own_estimate_oracle(max_model_len: int, estimated: int) -> None:
    assert estimate_max_model_len(vllm_test_model(), 8 * GiB, max_model_len) == estimated


def test_estimate_equals_a_linear_scan_on_a_mixed_model() -> None:
    specs = {"full": FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8, dtype=torch.float32),
             "window": SlidingWindowSpec(block_size=4, num_kv_heads=1, head_size=8, dtype=torch.float32, sliding_window=6)}
    for budget in range(0, 3000, 37):
        scan = max((n for n in range(1, 101) if max_memory_usage_bytes(specs, n, 8) <= budget), default=0)
        assert estimate_max_model_len(specs, budget, 100, 8) == scan


NULL_BLOCK = 8 << 20  # one pool block of the test model: 32 layers x 256 KiB (vLLM 0.33.0's null block)


def test_fit_check_passes_the_null_block_plus_an_exact_fit_and_an_attention_free_model() -> None:
    assert null_block_bytes(vllm_test_model()) == NULL_BLOCK
    assert check_enough_kv_cache_memory(vllm_test_model(), 8 * GiB + NULL_BLOCK, 16384) is None
    assert check_enough_kv_cache_memory({}, -5, 16384) is None


def test_an_exact_fit_without_the_null_block_is_refused_with_the_reduced_budget() -> None:
    with pytest.raises(ValueError) as caught:
        check_enough_kv_cache_memory(vllm_test_model(), 8 * GiB, 16384)
    assert str(caught.value) == (
        "To serve at least one request with the model's max seq len (16384), (8.0 GiB KV cache is needed, which "
        "is larger than the available KV cache memory (7.99 GiB). Based on the available memory, the estimated "
        "maximum model length is 16368. Try increasing `gpu_memory_utilization` (which also controls CPU memory on "
        "the CPU backend) or decreasing `max_model_len` when initializing the engine. See "
        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")


def test_not_enough_memory_message_names_the_estimate() -> None:
    with pytest.raises(ValueError) as caught:
        check_enough_kv_cache_memory(vllm_test_model(), 8 * GiB + NULL_BLOCK, 16385)
    assert str(caught.value).startswith(
        "To serve at least one request with the model's max seq len (16385), (8.01 GiB KV cache is needed, which "
        "is larger than the available KV cache memory (8.0 GiB). Based on the available memory, the estimated "
        "maximum model length is 16384. ")


def test_message_leaves_out_an_estimate_of_zero() -> None:
    with pytest.raises(ValueError) as caught:
        check_enough_kv_cache_memory(vllm_test_model(), NULL_BLOCK + (1 << 20), 16)
    assert "(0.0 GiB). Try increasing `gpu_memory_utilization`" in str(caught.value)
    assert "estimated maximum model length" not in str(caught.value)


def test_a_budget_of_only_the_null_block_is_no_memory() -> None:
    with pytest.raises(ValueError) as caught:
        check_enough_kv_cache_memory(vllm_test_model(), NULL_BLOCK, 16)
    assert str(caught.value) == NO_AVAILABLE_MEMORY_MESSAGE
    assert check_enough_kv_cache_memory(vllm_test_model(), 2 * NULL_BLOCK, 16) is None


@pytest.mark.parametrize("budget", [0, -1])
def test_empty_budget_gets_the_no_memory_message(budget: int) -> None:
    with pytest.raises(ValueError) as caught:
        check_enough_kv_cache_memory(vllm_test_model(), budget, 1)
    assert str(caught.value) == NO_AVAILABLE_MEMORY_MESSAGE


@pytest.mark.parametrize("args, error, message", [
    (({"l": object()}, 1, 1), TypeError, r"kv_cache_spec\['l'\] has no max_memory_usage_bytes"),
    ((["spec"], 1, 1), TypeError, "kv_cache_spec must map layer names"),
    (({}, 1.5, 1), TypeError, "available_memory must be an int"),
    (({}, True, 1), TypeError, "available_memory must be an int"),
    (({}, 1, 0), ValueError, "max_model_len must be an int >= 1, got 0"),
    (({}, 1, 4, 0), ValueError, "max_num_batched_tokens must be an int >= 1, got 0"),
])
def test_bad_arguments_are_refused(args: tuple, error: type, message: str) -> None:
    for function in (check_enough_kv_cache_memory, estimate_max_model_len):
        with pytest.raises(error, match=message):
            function(*args)
