"""Hypothesis strategies of CAPI-ABI case inputs: EngineParams, struct members, command lines, headers.

Every strategy returns plain data shaped as the builders of ``build.py`` expect. The judging process imports this
module, so it imports neither ``impl`` nor ``oracles`` (nor ``build.py``, which does): the v16 member list below is
written out as plain data, and tests/capi/test_capi_judge_side.py checks it against the mirror's ``MEMBERS``.
"""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

V16_MEMBERS: tuple[tuple[str, str, int], ...] = (
    ("model_path", "const char *", 1), ("tokenizer_config_path", "const char *", 1), ("block_size", "int32_t", 1),
    ("num_blocks", "int32_t", 1), ("max_model_len", "int32_t", 1), ("max_num_seqs", "int32_t", 1),
    ("tool_parser", "const char *", 4), ("reasoning_parser", "const char *", 5),
    ("speculative_config", "const char *", 6), ("enable_prefix_caching", "int32_t", 7),
    ("max_num_batched_tokens", "int32_t", 9), ("scheduling_policy", "const char *", 9),
    ("kv_transfer_config", "const char *", 9), ("enable_jump_forward", "int32_t", 10), ("device", "int32_t", 14),
    ("gpu_memory_utilization", "double", 16), ("kv_cache_memory_bytes", "int64_t", 16),
)
"""``vllm_model_params`` at v16: (member, C type, version that added it), in struct order."""
STRING_MEMBERS = tuple(name for name, ctype, _ in V16_MEMBERS if ctype == "const char *")

# Text a C string can hold: no NUL, no lone surrogate (neither is UTF-8), non-ASCII welcome.
_c_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=12)
_optional_text = st.none() | _c_text | st.sampled_from(["", "模型/路径", "é", "\U0001f600", "fcfs"])


def _int_near_bounds(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high) | st.sampled_from([low, low + 1, high - 1, high])


def _utilization() -> st.SearchStrategy[float]:
    return st.floats(min_value=0.0, max_value=1.0, exclude_min=True, allow_nan=False) | st.sampled_from([0.92, 1.0, 5e-324])


def engine_params_inputs() -> st.SearchStrategy[dict[str, Any]]:
    """EngineParams fields with a C spelling: int32 bounds, budgets above 2^31, non-ASCII text, None."""
    fields: dict[str, st.SearchStrategy[Any]] = {name: _optional_text for name in STRING_MEMBERS}
    fields.update(
        block_size=_int_near_bounds(1, INT32_MAX),
        num_blocks=_int_near_bounds(0, INT32_MAX),
        max_model_len=_int_near_bounds(0, INT32_MAX),
        max_num_seqs=_int_near_bounds(1, INT32_MAX),
        max_num_batched_tokens=_int_near_bounds(0, INT32_MAX),
        enable_prefix_caching=st.sampled_from([0, 1, 2]),
        enable_jump_forward=st.sampled_from([0, 1, 2]),
        device=st.sampled_from([0, 1, 2]),
        gpu_memory_utilization=_utilization(),
        kv_cache_memory_bytes=st.sampled_from([0, 2**31, 2**32, 4 * 2**30 + 1, INT64_MAX]) | st.integers(0, INT64_MAX),
    )
    return st.fixed_dictionaries({}, optional=fields)


def _probe() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({
        "layers": st.integers(1, 64), "num_kv_heads": st.integers(1, 16), "head_size": st.sampled_from([64, 128, 256]),
        "block_size": st.sampled_from([16, 32]), "dtype": st.sampled_from(["float16", "bfloat16", "float32"])})


def v15_struct_inputs() -> st.SearchStrategy[dict[str, Any]]:
    """Valid v15 member values (v16 members left zero) and a probe."""
    v15: dict[str, st.SearchStrategy[Any]] = {name: _optional_text for name in STRING_MEMBERS}
    v15.update({name: st.integers(-2**31, INT32_MAX)
                for name in ("block_size", "num_blocks", "max_model_len", "max_num_seqs", "max_num_batched_tokens")})
    v15.update({name: st.sampled_from([0, 1, 2]) for name in ("enable_prefix_caching", "enable_jump_forward", "device")})
    return st.fixed_dictionaries({"v15": st.fixed_dictionaries({}, optional=v15), "probe": _probe()})


_invalid_utf8 = st.sampled_from([[0xFF], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82],
                                 [0x80], [0x61, 0xC3]])
_utf8_bytes = st.lists(st.integers(1, 255), max_size=6)


def member_inputs() -> st.SearchStrategy[dict[str, Any]]:
    """Raw struct members, bad ones included (NaN, out-of-range, invalid UTF-8), and a probe."""
    members: dict[str, st.SearchStrategy[Any]] = {
        name: st.none() | _c_text | _invalid_utf8 | _utf8_bytes for name in STRING_MEMBERS}
    members.update({name: st.integers(-2**31, INT32_MAX)
                    for name in ("block_size", "num_blocks", "max_model_len", "max_num_seqs", "max_num_batched_tokens")})
    members.update({name: st.integers(-2, 4) | st.integers(-2**31, INT32_MAX)
                    for name in ("enable_prefix_caching", "enable_jump_forward", "device")})
    members["gpu_memory_utilization"] = (st.floats(allow_nan=True, allow_infinity=True) |
                                         st.sampled_from([0.0, -0.0, 1.0, 0.92, float("nan"), 1.0000000000000002]))
    members["kv_cache_memory_bytes"] = st.integers(-2**63, INT64_MAX) | st.integers(-10, 2**20) | st.sampled_from([2**31, 2**32])
    return st.fixed_dictionaries({"members": st.fixed_dictionaries({}, optional=members), "probe": _probe()})


_size_text = st.one_of(
    st.integers(0, 2**62).map(str),
    st.tuples(st.integers(0, 4096), st.sampled_from(["K", "M", "G", "KiB", "MiB", "GiB", "k", "m", "g", "KB", "GB"]))
    .map(lambda t: f"{t[0]}{t[1]}"),
    st.sampled_from(["4GiB", "4 GiB", "25.6k", "1.5G", "4gb", "-1", "1e9", "", "0", "4294967296", "12abc"]),
)
_float_text = st.one_of(st.floats(-0.5, 1.5, allow_nan=False).map(repr),
                        st.sampled_from(["0", "0.0", "1", "0.92", "nan", "inf", "-0", "0.5", "abc"]))
_int_text = st.one_of(st.integers(-5, 2**20).map(str), st.sampled_from(["0", "-1", "16", "32", "x", "2147483647"]))


def argv_inputs() -> st.SearchStrategy[dict[str, Any]]:
    """Command lines of the example CLI's sizing flags, good and bad values mixed."""
    flags = {"--gpu-memory-utilization": _float_text, "--kv-cache-memory": _size_text,
             "--kv-cache-memory-bytes": _size_text, "--num-blocks": _int_text, "--block-size": _int_text,
             "--max-model-len": _int_text, "--model": _c_text.filter(lambda s: not s.startswith("-"))}
    pairs = st.lists(st.sampled_from(sorted(flags)), max_size=4, unique=True).flatmap(
        lambda names: st.tuples(*[st.tuples(st.just(n), flags[n]) for n in names]))
    return pairs.map(lambda items: {"argv": [word for pair in items for word in (pair[0], f"{pair[1]}")]})


_NEW_TYPES = st.sampled_from(["int32_t", "int64_t", "double", "const char *"])


def header_variants() -> st.SearchStrategy[dict[str, Any]]:
    """v16 headers with up to two new members inserted anywhere, any version and history entries, written in our
    "[vN]" convention or the C++ port's "(ABI vN)" one."""
    base = [[name, ctype, since] for name, ctype, since in V16_MEMBERS]

    @st.composite
    def variant(draw: st.DrawFn) -> dict[str, Any]:
        members = [list(m) for m in base]
        for index in range(draw(st.integers(0, 2))):
            at = draw(st.integers(0, len(members)))
            members.insert(at, [f"added_{index}", draw(_NEW_TYPES), draw(st.integers(15, 18))])
        newest = max(m[2] for m in members)
        version = draw(st.sampled_from([newest, newest, newest - 1, newest + 1, 16]))
        history = {v: [m[0] for m in members if m[2] == v] for v in range(1, max(version, newest) + 1)}
        if draw(st.booleans()) and history[newest]:
            history[newest] = history[newest][1:]  # an entry that forgets a member
        if version > newest and draw(st.booleans()):
            del history[version]  # a bump without a member that the history does not explain
        style = draw(st.sampled_from(["annotations", "headings"]))
        return {"members": members, "abi_version": version, "history": history, "style": style}

    return variant()


def member_writes() -> st.SearchStrategy[dict[str, Any]]:
    """{member, value}: an integer member and an int on either side of its C type's bounds, or anywhere."""
    int_members = [(name, ctype) for name, ctype, _ in V16_MEMBERS if ctype in ("int32_t", "int64_t")]

    def near(member: tuple[str, str]) -> st.SearchStrategy[dict[str, Any]]:
        bits = 32 if member[1] == "int32_t" else 64
        least, greatest = -2**(bits - 1), 2**(bits - 1) - 1
        edges = [least - 2, least - 1, least, least + 1, greatest - 1, greatest, greatest + 1, greatest + 2,
                 greatest + 2**bits + 1]
        value = st.sampled_from(edges) | st.integers(least * 4, greatest * 4)
        return st.fixed_dictionaries({"member": st.just(member[0]), "value": value})

    return st.sampled_from(int_members).flatmap(near)
