"""Each known-bad stand-in is told apart from the oracle by *generated* inputs alone, not only by the named
cases: the strategies reach the shapes that matter (MEM-1.x, MEM-2.x). Case-only ones are listed and skipped."""
from __future__ import annotations

import warnings
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from gates.rows.road_v1_mem import subjects as adapters
from vllm_gates import Call
from gates.rows.road_v1_mem import build as inputs
from gates.rows.road_v1_mem.known_bad import blocks as kv_blocks, models as kv_models, sizing as kv_sizing
from gates.rows.road_v1_mem import strategies
from oracles import kv_allocation, kv_budget, kv_model_layers, kv_sizes

pytestmark = pytest.mark.cpu


def _kwargs(data: Any) -> Call:
    return Call(kwargs=data)


GATES = {  # gate: (strategy, impl builder, oracle, oracle builder)
    "kv-bytes-per-block": (strategies.kv_layouts, inputs.kv_layout_impl, kv_allocation.marginal_bytes_per_block,
                           inputs.kv_layout_oracle),
    "kv-page-size": (strategies.single_specs, inputs.spec_impl, kv_allocation.page_bytes_of_layer, inputs.spec_oracle),
    "num-blocks-precedence": (strategies.sizing_inputs, inputs.sizing_impl, kv_budget.blocks_for_knobs,
                              inputs.sizing_oracle),
    "model-geometry": (strategies.model_inputs, inputs.model_impl, kv_model_layers.model_bytes_per_block,
                       inputs.model_oracle),
    "size-parsing": (strategies.size_texts, _kwargs, kv_sizes.read_size, _kwargs),
}
STAND_INS = [
    ("kv-bytes-per-block", kv_blocks.mla_keeps_factor_2), ("kv-bytes-per-block", kv_blocks.mamba_counted_per_block),
    ("kv-bytes-per-block", kv_blocks.group_counted_once), ("kv-bytes-per-block", kv_blocks.per_layer_path_ignored),
    ("kv-bytes-per-block", kv_blocks.padded_page_ignored),
    ("kv-page-size", kv_blocks.page_mla_keeps_factor_2), ("kv-page-size", kv_blocks.page_nvfp4_unpacked),
    ("kv-page-size", kv_blocks.page_scales_dropped), ("kv-page-size", kv_blocks.page_fp8_ds_mla_as_latent),
    ("num-blocks-precedence", kv_sizing.bytes_scaled_by_utilization),
    ("num-blocks-precedence", kv_sizing.bytes_beat_override),
    ("num-blocks-precedence", kv_sizing.sub_block_budget_gives_zero),
    ("num-blocks-precedence", kv_sizing.budget_rounded_to_nearest),
    ("num-blocks-precedence", kv_sizing.override_clamped_to_budget),
    ("num-blocks-precedence", kv_sizing.profile_ignored),
    ("model-geometry", kv_models.kv_heads_not_replicated), ("model-geometry", kv_models.head_dim_ignored),
    ("model-geometry", kv_models.mla_latent_per_head), ("model-geometry", kv_models.linear_layers_as_attention),
    ("size-parsing", kv_sizing.size_leading_digits), ("size-parsing", kv_sizing.size_lowercase_binary),
    ("size-parsing", kv_sizing.size_binary_fraction_allowed), ("size-parsing", kv_sizing.size_fraction_truncated),
    ("size-parsing", kv_sizing.size_vllm_only),
]
# padded-below-real-accepted: generated pages are never padded below the real size, so only the
# named case `padded-below-real` can reject it; the harness shows that rejection (gates audit).
CASE_ONLY = [kv_blocks.page_padded_below_real_accepted]


def _outcome(fn: Callable[..., Any], call: Call) -> tuple[str, Any]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "value", call.apply(fn)
    except Exception as exc:  # noqa: BLE001 - the class name is the outcome
        return "raised", type(exc).__name__


class Rejected(Exception):
    """A generated input on which the stand-in and the oracle disagree."""


@pytest.mark.parametrize(("gate", "stand_in"), STAND_INS, ids=lambda x: getattr(x, "__name__", x))
def test_generated_inputs_reject_the_stand_in(gate, stand_in):
    strategy, build_impl, oracle, build_oracle = GATES[gate]

    @settings(max_examples=3000, database=None, deadline=None, derandomize=True, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy())
    def hunt(data: Any) -> None:
        if _outcome(stand_in, build_impl(data)) != _outcome(oracle, build_oracle(data)):
            raise Rejected(data)

    with pytest.raises(Rejected):
        hunt()


def test_case_only_stand_ins_are_still_wrong_somewhere():
    spec = {"kind": "full", "block_size": 16, "num_kv_heads": 2, "head_size": 64, "dtype": "float32",
            "page_size_padded": 100}
    for stand_in in CASE_ONLY:
        assert _outcome(stand_in, Call(args=(spec,))) == ("value", 100)
        assert _outcome(adapters.page_size_bytes, Call(args=(spec,))) == ("raised", "ValueError")
