"""Hypothesis strategies for the ROAD-V1-MEM gates: specs of every kind, KV layouts, sizing knobs,
size strings and model configs, as plain data in the shapes ``gates.rows.road_v1_mem.build`` builds from.

The judging process imports this module: it imports only hypothesis and the standard library (dtypes are names,
their sizes the table below), never ``impl``, ``oracles`` or ``build.py``."""
from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st

_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
# kv_quant_mode -> element dtypes it may be stored in
_MODE_DTYPES = {"NONE": ["float32", "float16", "bfloat16", "uint8"], "FP8_PER_TENSOR": ["uint8", "float8_e4m3fn"],
                "INT8_PER_TOKEN_HEAD": ["int8"], "FP8_PER_TOKEN_HEAD": ["uint8"], "NVFP4": ["uint8"]}
BLOCK_SIZES = st.one_of(st.sampled_from([1, 8, 16, 32, 64]), st.integers(1, 128))


def _padding_bound(spec: dict[str, Any]) -> int:
    """A page size no spec of these fields can exceed: K and V at full width plus fp32 scales."""
    bs, heads, width = spec["block_size"], spec["num_kv_heads"], spec["head_size"]
    v_width = spec.get("head_size_v") or width
    return bs * heads * (width + v_width) * _ITEMSIZE[spec["dtype"]] + 2 * bs * heads * 4


@st.composite
def _maybe_padded(draw: st.DrawFn, spec: dict[str, Any]) -> dict[str, Any]:
    if draw(st.integers(0, 3)) == 0:
        spec["page_size_padded"] = _padding_bound(spec) + draw(st.integers(0, 4096))
    return spec


@st.composite
def attention_specs(draw: st.DrawFn, kinds: tuple[str, ...] = ("full", "mla", "sliding_window", "chunked_local")
                    ) -> dict[str, Any]:
    """An attention spec of any kind, quantization mode and padding."""
    kind = draw(st.sampled_from(kinds))
    if kind == "mla" and draw(st.integers(0, 4)) == 0:
        spec = {"kind": "mla", "block_size": draw(BLOCK_SIZES), "num_kv_heads": 1, "head_size": 576,
                "dtype": "uint8", "kv_quant_mode": "FP8_PER_TENSOR", "cache_dtype_str": "fp8_ds_mla"}
        return draw(_maybe_padded(spec))
    modes = list(_MODE_DTYPES) if kind == "full" else [m for m in _MODE_DTYPES if m != "NVFP4"]
    mode = draw(st.sampled_from(modes))
    width = st.integers(1, 16).map(lambda w: 16 * w) if mode == "NVFP4" else st.integers(1, 320)
    spec = {"kind": kind, "block_size": draw(BLOCK_SIZES),
            "num_kv_heads": draw(st.integers(1, 2) if kind == "mla" else st.integers(1, 8)),
            "head_size": draw(st.just(576) | width if kind == "mla" else width),
            "dtype": draw(st.sampled_from(_MODE_DTYPES[mode]))}
    if mode != "NONE":
        spec["kv_quant_mode"] = mode
    if kind == "full" and draw(st.booleans()):  # NVFP4's K and V have one width (layouts must build)
        spec["head_size_v"] = spec["head_size"] if mode == "NVFP4" else draw(width)
    if kind == "full" and draw(st.integers(0, 3)) == 0:
        spec[draw(st.sampled_from(["sliding_window", "attention_chunk_size"]))] = draw(st.integers(1, 8192))
    if kind == "sliding_window":
        spec["sliding_window"] = draw(st.integers(1, 8192))
    if kind == "chunked_local":
        spec["attention_chunk_size"] = draw(st.integers(1, 8192))
    return draw(_maybe_padded(spec))


@st.composite
def mamba_specs(draw: st.DrawFn) -> dict[str, Any]:
    """Recurrent state: one to three tensors of up to three dims."""
    shapes = draw(st.lists(st.lists(st.integers(1, 64), min_size=1, max_size=3), min_size=1, max_size=3))
    dtypes = draw(st.lists(st.sampled_from(["float32", "float16", "bfloat16"]), min_size=len(shapes),
                           max_size=len(shapes)))
    spec = {"kind": "mamba", "block_size": draw(BLOCK_SIZES), "shapes": shapes, "dtypes": dtypes}
    if draw(st.integers(0, 3)) == 0:
        real = sum(_ITEMSIZE[d] * math.prod(s) for s, d in zip(shapes, dtypes))
        spec["page_size_padded"] = real + draw(st.integers(0, 4096))
    return spec


def single_specs() -> st.SearchStrategy[dict[str, Any]]:
    """Case inputs ``{spec: SPEC}`` for the page-size gate."""
    return st.one_of(attention_specs(), mamba_specs()).map(lambda spec: {"spec": spec})


@st.composite
def _padded_anywhere(draw: st.DrawFn, spec: dict[str, Any]) -> dict[str, Any]:
    """A padded page drawn at, below or above the real page, one spec in four (below it: refused by both)."""
    if draw(st.integers(0, 3)) == 0:
        bound = _padding_bound(spec) if spec["kind"] != "mamba" else \
            sum(_ITEMSIZE[d] * math.prod(s) for s, d in zip(spec["shapes"], spec["dtypes"]))
        spec["page_size_padded"] = draw(st.integers(1, bound + 4096))
    return spec


def upstream_single_specs() -> st.SearchStrategy[dict[str, Any]]:
    """Case inputs ``{spec: SPEC}`` for upstream-kv-page-size: every kind and laid-out mode, padded pages above and
    below the real one, NVFP4 with unequal widths now and then (both refuse); never a declared deviation's SPEC
    (spec/deviations.yaml kv-spec-*: no quantized 2-byte dtype, no NVFP4 outside full attention or off 16, no MLA
    head_size_v, no fp8_ds_mla but 576/1 head/uint8, no bool or below-minimum field)."""
    specs = st.one_of(attention_specs(), mamba_specs()).flatmap(_nvfp4_widths_apart).flatmap(_padded_anywhere)
    return specs.map(lambda spec: {"spec": spec})


@st.composite
def _nvfp4_widths_apart(draw: st.DrawFn, spec: dict[str, Any]) -> dict[str, Any]:
    """An NVFP4 spec's V width moved off K's, one time in three (both refuse it)."""
    if spec.get("kv_quant_mode") == "NVFP4" and draw(st.integers(0, 2)) == 0:
        spec["head_size_v"] = 16 * draw(st.integers(1, 16).filter(lambda w: 16 * w != spec["head_size"]))
    return spec


@st.composite
def _mamba_usage_specs(draw: st.DrawFn) -> dict[str, Any]:
    spec = draw(mamba_specs())
    mode = draw(st.sampled_from(["none", "align", "align", None]))
    if mode is not None:
        spec["mamba_cache_mode"] = mode
    if draw(st.booleans()):
        spec["num_speculative_blocks"] = draw(st.integers(0, 4))
    if draw(st.booleans()):
        spec["num_prefill_checkpoint_blocks"] = draw(st.integers(0, 3))
    return spec


@st.composite
def max_usage_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """Inputs ``{spec, max_model_len, max_num_batched_tokens?}`` for upstream-kv-max-memory-usage: attention specs of
    every kind, Mamba specs in cache modes none and align with speculative and prefill-checkpoint states; lengths
    up to 2^20 tokens and batches below, at and above the window or chunk."""
    spec = draw(st.one_of(attention_specs(), _mamba_usage_specs()))
    data: dict[str, Any] = {"spec": spec, "max_model_len": draw(st.one_of(st.integers(1, 4096),
                                                                         st.integers(1, 2**20)))}
    if draw(st.booleans()):
        data["max_num_batched_tokens"] = draw(st.one_of(st.integers(1, 8192), st.sampled_from([1, 16, 2048])))
    return data


@st.composite
def _layouts(draw: st.DrawFn, max_groups: int, max_layers: int) -> dict[str, Any]:
    groups = []
    for g in range(draw(st.integers(1, max_groups))):
        spec = draw(st.one_of(attention_specs(), attention_specs(), mamba_specs()))
        count = draw(st.integers(1, max_layers))
        groups.append({"layers": [f"g{g}.layer{i}" for i in range(count)], "spec": spec})
    if not draw(st.booleans()):
        return {"groups": groups}
    # heterogeneous-KV form: one entry per real layer (null for recurrent ones), placeholder groups
    per_layer = [None if g["spec"]["kind"] == "mamba" else g["spec"] for g in groups for _ in g["layers"]]
    per_layer = draw(st.permutations(per_layer))
    placeholders = [g if g["spec"]["kind"] == "mamba" else {"layers": [f"placeholder{i}"], "spec": g["spec"]}
                    for i, g in enumerate(groups)]
    return {"groups": placeholders, "per_layer": list(per_layer)}


def kv_layouts() -> st.SearchStrategy[dict[str, Any]]:
    """KV layouts for the bytes-per-block gate: 1-4 groups of 1-5 layers, grouped or per-layer form."""
    return _layouts(4, 5)


@st.composite
def sizing_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """Knob combinations (override, budget, utilization, profile) over small generated probes."""
    params: dict[str, Any] = {}
    if draw(st.integers(0, 3)) == 0:
        params["num_blocks"] = draw(st.integers(1, 10**6))
    budget = draw(st.sampled_from(["none", "small", "large"]))
    if budget != "none":
        params["kv_cache_memory_bytes"] = draw(st.integers(1, 2**16) if budget == "small" else st.integers(1, 2**34))
    if draw(st.booleans()):
        params["gpu_memory_utilization"] = draw(st.floats(0.01, 1.0))
    data: dict[str, Any] = {"params": params, "probe": draw(_layouts(3, 3))}
    if draw(st.booleans()):
        data["profile"] = {"available_kv_cache_memory": draw(st.integers(-2**20, 2**34))}
    return data


# The size grammar (MEM-1.9, MEM-1.10), written out by hand for generating, not shared with impl or oracle.
_SIZE_UNITS = ["k", "m", "g", "t", "K", "M", "G", "T", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB"]
_DECIMAL_SIZE_UNITS = {"k": 3, "m": 6, "g": 9, "t": 12, "KB": 3, "MB": 6, "GB": 9, "TB": 12}  # unit: digits of 10^n
_SIZE_PADDING = ["", "", "", " ", "  ", "\t", "\n", " \r\n", "\xa0", "\u3000"]  # str.strip removes each of them
_SIZE_SEPARATORS = ["", "", "", " ", "  "]  # what may stand between number and unit
_SIZE_BAD_SEPARATORS = ["\t", "\xa0", "\u2009", "\u3000", "_", "-", ".", ",", "\n"]
_SIZE_BAD_UNITS = ["B", "gb", "GIB", "kb", "KIB", "gib",  # the first six drawn more often: MEM-1.10 names such
                   "b", "kB", "Kb", "mb", "Gb", "gB", "tb", "Gib", "gIB", "kiB", "Ki", "Gi", "i", "iB", "GiBs",
                   "Gbit", "KiiB", "KBi", "bytes", "byte", "P", "p", "PB", "PiB", "E", "EiB", "x", "\u00b5", "GiB.",
                   "G.", "k.", "\u0131B"]
_SIZE_SIGNS = ["+", "-", "+", "-", "\u2212", "\u00b1"]
# zeros of digit runs str.isdigit/int() would take: full-width, Arabic-Indic, Devanagari, subscript
_SIZE_FOREIGN_DIGITS = ["\uff10", "\u0660", "\u0966", "\u2080"]
_SIZE_TYPO_CHARS = "0123456789.,_ -+eEkKmMgGtTiIbBoOlx\t\u3000\uff14"


@st.composite
def _size_numbers(draw: st.DrawFn, unit: str) -> tuple[str, str | None]:
    """A numeral (whole digits, fraction digits or None); leading and trailing zeros included."""
    whole = draw(st.sampled_from(["0", "1", "4", "16", "25", "512"])
                 | st.from_regex(r"0{0,2}[0-9]{1,12}", fullmatch=True))
    if draw(st.integers(0, 2)) != 0:  # a fraction one time in three
        return whole, None
    # a decimal unit of 10^n gives whole bytes for up to n fraction digits: go both below and beyond n
    digits = _DECIMAL_SIZE_UNITS.get(unit, 2)
    fraction = draw(st.sampled_from(["0", "5", "6", "25", "0005"]) |
                    st.from_regex(r"[0-9]{1,%d}0{0,3}" % (digits + 2), fullmatch=True))
    return whole, fraction


@st.composite
def _well_formed_sizes(draw: st.DrawFn) -> str:
    """Texts of the grammar: digits, an optional fraction, an optional separator and unit, padding around."""
    unit = draw(st.sampled_from(["", ""] + _SIZE_UNITS))  # "": plain bytes
    whole, fraction = draw(_size_numbers(unit))
    number = whole if fraction is None else f"{whole}.{fraction}"
    separator = draw(st.sampled_from(_SIZE_SEPARATORS)) if unit else ""
    return draw(st.sampled_from(_SIZE_PADDING)) + number + separator + unit + draw(st.sampled_from(_SIZE_PADDING))


def _flip_case(draw: st.DrawFn, text: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    return "".join(c.swapcase() if flip else c for c, flip in zip(text, flips))


@st.composite
def _near_miss_sizes(draw: st.DrawFn) -> str:
    """A well-formed size bent one way: the spellings a user or a port gets wrong (most are refused)."""
    unit = draw(st.sampled_from(_SIZE_UNITS))
    whole, fraction = draw(_size_numbers(unit))
    number = whole if fraction is None else f"{whole}.{fraction}"
    sep = draw(st.sampled_from(_SIZE_SEPARATORS))
    kind = draw(st.sampled_from(["case", "case", "bad-unit", "bad-unit", "bad-unit", "sign", "sign", "typo", "typo",
                                 "doubled", "underscore", "foreign-digits", "exponent", "dots", "separator",
                                 "unit-first", "inner-space", "radix", "empty"]))
    if kind == "case":  # "4gb", "4GIB", "4Gib", "4 kB", "4K" for "4k": only the exact spellings are units
        case = draw(st.sampled_from([str.lower, str.upper, str.swapcase, str.capitalize, None]))
        return number + sep + (_flip_case(draw, unit) if case is None else case(unit))
    if kind == "bad-unit":  # "4B", "4 bytes", "4PiB"
        return number + sep + draw(st.sampled_from(_SIZE_BAD_UNITS[:6]) | st.sampled_from(_SIZE_BAD_UNITS))
    if kind == "doubled":  # "4GG", "4GiBGiB", "4 k k", "4kG"
        return number + sep + unit + draw(st.sampled_from(["", " "])) + draw(st.sampled_from([unit] + _SIZE_UNITS))
    if kind == "typo":  # one character inserted, deleted or replaced anywhere
        text = number + sep + unit
        at = draw(st.integers(0, len(text)))
        typo = draw(st.sampled_from(_SIZE_TYPO_CHARS))
        edit = draw(st.sampled_from(["insert", "delete", "replace"]))
        if edit == "insert":
            return text[:at] + typo + text[at:]
        if edit == "delete":
            return text[:at] + text[at + 1:]
        return text[:at] + typo + text[at + 1:]
    if kind == "sign":  # "-1", "+4GiB", "- 4 GB", "4-GB"
        sign = draw(st.sampled_from(_SIZE_SIGNS))
        where = draw(st.sampled_from(["front", "front", "front", "spaced", "after"]))
        if where == "after":
            return number + sign + unit
        return sign + (" " if where == "spaced" else "") + number + draw(st.sampled_from(["", sep + unit]))
    if kind == "underscore":  # "1_000", "4_GiB", "_4k"
        at = draw(st.integers(0, len(number)))
        return number[:at] + "_" + number[at:] + sep + unit
    if kind == "foreign-digits":  # "４GiB": some or all digits swapped for look-alikes
        zero = ord(draw(st.sampled_from(_SIZE_FOREIGN_DIGITS)))
        swaps = draw(st.lists(st.booleans(), min_size=len(number), max_size=len(number)))
        return "".join(chr(zero + int(c)) if swap and c.isdigit() else c for c, swap in zip(number, swaps)) + sep + unit
    if kind == "exponent":  # "1e9", "1E3k", "2.5e-3G"
        exponent = "".join(draw(st.sampled_from(part)) for part in (["e", "E"], ["", "+", "-"], ["0", "3", "9"]))
        return number + exponent + draw(st.sampled_from(["", sep + unit]))
    if kind == "dots":  # "4.", ".5k", "4..5G", "1.2.3k", "4,5k"
        form = draw(st.sampled_from(["{w}.", "{w}.", ".{w}", ".{w}", "{w}..{w}", "{w}.{w}.{w}", "{w},{w}", "{w}.{w}."]))
        return form.format(w=whole) + sep + unit
    if kind == "separator":  # "4\tGB", "4\u00a0GiB", "4-GB": only U+0020 separates
        return number + draw(st.sampled_from(_SIZE_BAD_SEPARATORS)) + unit
    if kind == "unit-first":  # "GiB4", "k 25.6"
        return unit + sep + number
    if kind == "inner-space":  # "4 096", "25 .6k", "25. 6k"
        at = draw(st.integers(1, len(number)))
        return number[:at] + " " + number[at:] + sep + unit
    if kind == "radix":  # "0x10", "0o7k", "0b1G"
        return draw(st.sampled_from(["0x", "0X", "0o", "0b"])) + whole + sep + unit
    return draw(st.sampled_from(["", " ", "\t", sep + unit, "."]))  # nothing to read


@st.composite
def size_texts(draw: st.DrawFn) -> dict[str, Any]:
    """Size strings: well-formed ones of every unit and spacing, near misses of them, arbitrary short text."""
    which = draw(st.integers(0, 19))
    if which < 8:
        text = draw(_well_formed_sizes())
    elif which < 19:
        text = draw(_near_miss_sizes())
    else:
        text = draw(st.text(alphabet=" +-.,0123456789eEkKmMgGtTiIbB_\t\uff14", max_size=8))
    return {"text": text, "what": "--kv-cache-memory"}


@st.composite
def model_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """Synthetic Hugging Face configs of each family, with a tp size, block size and KV cache dtype."""
    family = draw(st.sampled_from(["dense", "mla", "gdn_hybrid", "gemma2", "gemma3", "layer_types"]))
    kv_heads = draw(st.sampled_from([1, 2, 4, 8]))
    cfg: dict[str, Any] = {"model_type": {"gemma2": "gemma2", "gemma3": "gemma3_text"}.get(family, "llama"),
                           "num_hidden_layers": draw(st.integers(1, 12)),
                           "num_attention_heads": kv_heads * draw(st.sampled_from([1, 2, 4])),
                           "num_key_value_heads": kv_heads,
                           "torch_dtype": draw(st.sampled_from(["bfloat16", "float16", "float32"]))}
    if draw(st.booleans()):
        cfg["head_dim"] = draw(st.sampled_from([64, 80, 128, 256, 125]))  # 125: odd, refused (RoPE)
    cfg["hidden_size"] = cfg["num_attention_heads"] * draw(st.sampled_from([32, 64, 96, 128]))
    cache_dtypes = ["auto", "float16", "fp8", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head", "nvfp4"]
    if family == "mla":
        cfg.update(model_type="deepseek_v2", kv_lora_rank=draw(st.sampled_from([512, 256])),
                   qk_rope_head_dim=draw(st.sampled_from([64, 32])))
        cache_dtypes = ["auto", "fp8", "fp8_ds_mla", "bfloat16"]
    elif family == "gdn_hybrid":
        cfg.update(model_type="qwen3_next", full_attention_interval=draw(st.integers(1, 4)),
                   linear_num_key_heads=draw(st.sampled_from([2, 4])), linear_num_value_heads=draw(st.sampled_from([4, 8])),
                   linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4)
    elif family in ("gemma2", "gemma3"):
        cfg["sliding_window"] = draw(st.sampled_from([512, 4096]))
        if family == "gemma3":
            cfg["sliding_window_pattern"] = draw(st.integers(1, 6))
    elif family == "layer_types":
        cfg["sliding_window"] = 1024
        cfg["layer_types"] = draw(st.lists(st.sampled_from(["full_attention", "sliding_attention"]),
                                           min_size=cfg["num_hidden_layers"], max_size=cfg["num_hidden_layers"]))
    return {"config": cfg, "tensor_parallel_size": draw(st.sampled_from([1, 2, 3, 4, 8])),
            "block_size": draw(st.sampled_from([1, 16, 32])), "kv_cache_dtype": draw(st.sampled_from(cache_dtypes))}


# ---------------------------------------------------------------- upstream gates (vLLM 0.33.0 itself as the oracle)
_VLLM_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_VLLM_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_VLLM_PADDING = ["", "", "", " ", "  ", "\t", "\n", " \t "]
# Texts both parsers refuse, with the same error class once argparse's ArgumentTypeError is read as a usage error.
_SHARED_REFUSALS = ["", " ", "4gb", "4Gb ", "4B", "4b", "1e9", "3.0", "4.", ".5k", "4kk", "4KM", "0x10", "4 x", "k",
                    "4.5G", "1.5K", "0.1T", "2.25M", "4p", "4P", "1.2.3k", "abc"]


def _exact_in_float(number: str, scale: int) -> bool:
    """``number`` x ``scale`` is whole, and vLLM's float product truncated gives it exactly (no byte lost)."""
    from fractions import Fraction

    exact = Fraction(number) * scale
    return exact.denominator == 1 and int(float(number) * scale) == exact


@st.composite
def vllm_size_texts(draw: st.DrawFn) -> dict[str, Any]:
    """Size texts in vLLM 0.33.0's own syntax (``human_readable_int``): plain ASCII digits, DIGITS<K|M|G|T>,
    DIGITS[.DIGITS]<k|m|g|t> whose float product is exact, padding around; and texts both parsers refuse. Never
    an explicit unit, a space before the suffix, a sign, an underscore, other digits or a decimal the float product
    reads differently: those are the declared deviations (spec/deviations.yaml, upstream-size-deviations)."""
    which = draw(st.integers(0, 9))
    pad = draw(st.sampled_from(_VLLM_PADDING)), draw(st.sampled_from(_VLLM_PADDING))
    if which == 0:
        return {"text": draw(st.sampled_from(_SHARED_REFUSALS)), "what": "--kv-cache-memory"}
    if which <= 2:
        body = str(draw(st.integers(0, 2**62)))
    elif which <= 5:
        suffix = draw(st.sampled_from(sorted(_VLLM_BINARY)))
        body = f"{draw(st.integers(0, 10**6))}{suffix}"
    else:
        suffix = draw(st.sampled_from(sorted(_VLLM_DECIMAL)))
        scale = _VLLM_DECIMAL[suffix]
        places = len(str(scale)) - 1
        whole = draw(st.integers(0, 10**5))
        digits = draw(st.integers(0, places))
        if digits == 0:
            number = str(whole)
        else:
            number = f"{whole}.{draw(st.integers(0, 10**digits - 1)):0{digits}d}"
        if not _exact_in_float(number, scale):
            number = str(whole)
        body = number + suffix
    return {"text": pad[0] + body + pad[1], "what": "--kv-cache-memory"}


# vLLM 0.33.0's KV_CACHE_DTYPES (vllm/config/cache.py), in its order.
VLLM_CACHE_DTYPES = ["auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla",
                     "nvfp4_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc",
                     "octave_k3v4", "octave_k3v3", "octave_k3v3_compact", "ultraquant_4bit", "int4_per_token_head",
                     "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6"]


@st.composite
def cache_dtype_texts(draw: st.DrawFn) -> dict[str, Any]:
    """``--kv-cache-dtype`` strings: vLLM's accepted ones, others with their prefixes (fp8*, nvfp4*), near misses
    (case, padding, a character off) and arbitrary text; never an unknown turboquant_/octave_ name (vLLM's KeyError,
    outside the operation's contract)."""
    which = draw(st.integers(0, 5))
    if which <= 2:
        text = draw(st.sampled_from(VLLM_CACHE_DTYPES))
    elif which == 3:
        text = draw(st.sampled_from(["fp8", "nvfp4", "int8", "int4", "fp16", "ultraquant"])) + draw(
            st.text(alphabet="_abcdefxyz0123456789", max_size=6))
    elif which == 4:
        name = draw(st.sampled_from(VLLM_CACHE_DTYPES))
        edit = draw(st.sampled_from(["upper", "pad", "drop-last", "suffix"]))
        text = {"upper": name.upper(), "pad": f" {name}", "drop-last": name[:-1], "suffix": name + "x"}[edit]
    else:
        text = draw(st.text(alphabet="_abcdefnpvx0123456789", max_size=10))
    if text.startswith(("turboquant_", "octave_")) and text not in VLLM_CACHE_DTYPES:
        text = "auto"
    return {"cache_dtype": text}
