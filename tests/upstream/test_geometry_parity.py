"""kv-plan's vLLM pool view and the model-geometry refusals against vLLM 0.33.0 itself (MEM-2.10 to MEM-2.12).

- impl/v1/core/kv_pool_groups.py re-derives vLLM's KV cache groups and pool block for kv-plan's ``vllm_pool``;
  on the shipped fixtures its figures must be upstream/model_geometry.py's ``pool_bytes_per_block`` (vLLM's own
  grouping, vllm/v1/core/kv_cache_planning.py), and where it declines (GDN hybrids) vLLM's pool must indeed hold
  Mamba groups at a raised block size.
- A tp size vLLM refuses is refused by the port with the same facts (the numbers in vLLM's message), which the
  gates' raises-cases cannot check against the oracle.

Skipped as a whole where vLLM is not installed (bash ci/install-upstream.sh installs the pin).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.upstream import pinned  # noqa: F401  (skips this module unless the pinned vLLM is installed)

import upstream  # noqa: E402

pytestmark = pytest.mark.upstream

from _vllm_gates.values.facts import facts_in  # noqa: E402
from impl.entrypoints.model_geometry import ProbeRequest, load_model_config, probe_kv_cache_config  # noqa: E402
from impl.v1.core import kv_pool_groups  # noqa: E402
from upstream import model_geometry  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[2] / "gates" / "rows" / "road_v1_mem" / "fixtures" / "models"
STEMS = ["llama-3.1-8b", "deepseek-v2-lite", "qwen3-next-80b-a3b", "gemma-2-9b-it"]


def _probe(stem: str, tp: int, block_size: int = 16):
    return probe_kv_cache_config(load_model_config(FIXTURES / f"{stem}.json"),
                                 ProbeRequest(tensor_parallel_size=tp, block_size=block_size))


def _raw(stem: str) -> dict:
    return json.loads((FIXTURES / f"{stem}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("stem", STEMS)
def test_kv_pool_groups_is_vllms_pool(stem: str, tp: int) -> None:
    probe = _probe(stem, tp)
    upstream_pool = model_geometry.pool_bytes_per_block(_raw(stem), tp, 16)
    reason = kv_pool_groups.unmodelled_reason(probe)
    if reason is not None:
        # kv-plan declines the GDN hybrid: vLLM's pool there has Mamba groups and a raised block size.
        assert stem == "qwen3-next-80b-a3b", reason
        assert any(group["kind"] == "MambaSpec" for group in upstream_pool["groups"])
        assert upstream_pool["block_size"] > 16
        return
    pool = kv_pool_groups.vllm_pool(probe, max_model_len=4096, max_num_batched_tokens=4096, num_blocks_override=1)
    assert pool.bytes_per_block == upstream_pool["pool_bytes_per_block"]
    assert sorted(len(group.layer_names) for group in pool.groups) == \
        sorted(group["layers"] for group in upstream_pool["groups"])
    assert sorted(group.bytes_per_block for group in pool.groups) == \
        sorted(group["bytes"] for group in upstream_pool["groups"])


@pytest.mark.parametrize("tp", [3, 5, 6, 12, 64])
@pytest.mark.parametrize("stem", STEMS)
def test_refusals_carry_vllms_facts(stem: str, tp: int) -> None:
    message = model_geometry.refusal(_raw(stem), tp)
    assert message is not None, f"vLLM 0.33.0 accepts {stem} at tp {tp}"
    with pytest.raises(ValueError) as ours:
        _probe(stem, tp)
    missing = [fact for fact in facts_in(message) if fact not in str(ours.value)]
    assert not missing, f"vLLM: {message!r}; ours: {ours.value}"


@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("stem", STEMS)
def test_accepted_where_vllm_accepts(stem: str, tp: int) -> None:
    assert model_geometry.refusal(_raw(stem), tp) is None
    assert _probe(stem, tp).kv_cache_groups
