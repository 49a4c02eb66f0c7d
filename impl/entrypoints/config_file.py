"""A model's ``config.json`` read with limits, and the fields KV sizing reads checked (MEM-2.10, MEM-2.12; issue 14).

Limits that fail fast, before any layer is built: a regular file of at most ``MAX_CONFIG_BYTES``, UTF-8 JSON
(no NaN or Infinity, no key twice in one object) nested at most ``MAX_DEPTH`` deep, at most ``MAX_LAYERS``
decoder layers. The fields ``kv-plan`` reads keep their JSON types: whole numbers are JSON integers (no
``32.0``, no ``"32"``), flags are JSON booleans (``"false"`` is refused, not truthy). Every refusal is a
``ConfigError`` that names the file and the field.
"""
from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any, Mapping

from impl.entrypoints.model_loader import INT32_MAX

MAX_CONFIG_BYTES = 16 * 2**20
MAX_DEPTH = 64
MAX_INT_DIGITS = 100
MAX_LAYERS = 10_000
"""More decoder layers than any published model has (the largest have a few hundred)."""

WHOLE_FIELDS = (
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size", "kv_lora_rank",
    "qk_rope_head_dim", "sliding_window", "sliding_window_pattern", "full_attention_interval",
    "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
    "linear_conv_kernel_dim",
)
"""Geometry fields KV sizing reads: JSON integers from 1 to 2^31 - 1 when present (null is absent)."""
MAX_LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                   "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
"""Where vLLM looks for a model's longest sequence (vllm/config/model.py, ``_get_and_verify_max_len``)."""
BOOLEAN_FIELDS = ("use_sliding_window",)

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class ConfigError(ValueError):
    """A ``config.json`` that cannot be sized; the message names the file, and the field when one is at fault."""


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters so that a huge value does not flood the message."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def read_config_text(path: str | Path) -> str:
    """The text of a regular file of at most ``MAX_CONFIG_BYTES``, as UTF-8; /dev/zero or a FIFO is refused unread."""
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the model config: {err.strerror}") from None
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{path} is {_kind(mode)}; the model config must be a regular file (a config.json)")
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the model config: {err.strerror}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path} is larger than {MAX_CONFIG_BYTES // 2**20} MiB; a config.json is a few kilobytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start}); "
                          "the model config must be a JSON file") from None


def nests_deeper_than(text: str, limit: int) -> bool:
    """Whether arrays and objects in JSON text nest more than ``limit`` deep (strings left out; no recursion)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for bracket in _NOT_BRACKET.sub("", _STRING.sub('""', text)):
        depth += 1 if bracket in "[{" else -1
        if depth > limit:
            return True
    return False


def _refuse_constant(name: str) -> Any:
    """NaN and Infinity, which Python's reader takes but JSON does not have, are refused."""
    raise ValueError(f"{name} is not a JSON number")


def _bounded_int(text: str) -> int:
    """A JSON integer of at most ``MAX_INT_DIGITS`` digits (no config field is larger; Python stops at 4300)."""
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits ({text[:12]}...) is larger than any "
                         "config field can be")
    return int(text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members; a key given twice is refused (JSON readers disagree on which one wins)."""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} appears twice in one object")
        seen.add(key)
    return dict(pairs)


def parse_config_json(text: str, path: str | Path) -> dict[str, Any]:
    """The JSON object in ``text``; malformed JSON is refused with the file, line and column."""
    if nests_deeper_than(text, MAX_DEPTH):
        raise ConfigError(f"{path}: JSON nested more than {MAX_DEPTH} deep; a model config nests a few levels")
    try:
        raw = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_refuse_constant, parse_int=_bounded_int)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON: {err.msg} (line {err.lineno}, column {err.colno})") from None
    except ValueError as err:  # a refused constant, key or integer
        raise ConfigError(f"{path}: not valid JSON for a model config: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a JSON object ({{...}}) at the top, got {type(raw).__name__}")
    return raw


def read_config_json(path: str | Path) -> dict[str, Any]:
    """:func:`read_config_text` then :func:`parse_config_json`."""
    return parse_config_json(read_config_text(path), path)


def _whole(cfg: Mapping[str, Any], name: str, path: str | Path, *, maximum: int = INT32_MAX) -> None:
    """A whole-number field, when present: a JSON integer (not a bool, float or string) from 1 to ``maximum``."""
    value = cfg.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum):
        raise ConfigError(f"{path}: {name!r} must be a JSON integer from 1 to {maximum}, got {shown(value)}")


def _check_architectures(cfg: Mapping[str, Any], path: str | Path) -> None:
    """``architectures`` a non-empty list of names (a string is not read letter by letter), ``model_type`` a string."""
    value = cfg.get("architectures")
    if value is not None and (not isinstance(value, list) or not value
                              or not all(isinstance(name, str) and name for name in value)):
        raise ConfigError(f"{path}: 'architectures' must be a non-empty JSON list of class names "
                          f"(like [\"LlamaForCausalLM\"]), got {shown(value)}")
    if cfg.get("model_type") is not None and not isinstance(cfg["model_type"], str):
        raise ConfigError(f"{path}: 'model_type' must be a JSON string, got {shown(cfg['model_type'])}")


def _check_rope_scaling(cfg: Mapping[str, Any], path: str | Path) -> None:
    """``rope_scaling``, which scales the model's length: an object with a string type and a positive factor."""
    rope = cfg.get("rope_scaling")
    if rope is None:
        return
    if not isinstance(rope, dict):
        raise ConfigError(f"{path}: 'rope_scaling' must be a JSON object or null, got {shown(rope)}")
    kind = rope.get("rope_type", rope.get("type"))
    if kind is not None and not isinstance(kind, str):
        raise ConfigError(f"{path}: 'rope_scaling.rope_type' must be a JSON string, got {shown(kind)}")
    factor = rope.get("factor", 1.0)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor <= 0:
        raise ConfigError(f"{path}: 'rope_scaling.factor' must be a positive JSON number, got {shown(factor)}")
    if kind == "yarn":
        _whole(rope, "original_max_position_embeddings", path)
        if rope.get("original_max_position_embeddings") is None:
            raise ConfigError(f"{path}: 'rope_scaling' of type yarn needs 'original_max_position_embeddings'")


def check_config_fields(cfg: Mapping[str, Any], path: str | Path) -> None:
    """Refuse a field KV sizing reads that has the wrong JSON type or an impossible value (see the module doc)."""
    _check_architectures(cfg, path)
    for name in (*WHOLE_FIELDS, *MAX_LENGTH_KEYS):
        _whole(cfg, name, path)
    _whole(cfg, "num_hidden_layers", path, maximum=MAX_LAYERS)
    for name in BOOLEAN_FIELDS:
        if name in cfg and not isinstance(cfg[name], bool):
            raise ConfigError(f"{path}: {name!r} must be a JSON boolean (true or false, unquoted), "
                              f"got {shown(cfg[name])}")
    types = cfg.get("layer_types")
    if types is not None and (not isinstance(types, list) or not all(isinstance(t, str) for t in types)):
        raise ConfigError(f"{path}: 'layer_types' must be a JSON list of strings, got {shown(types)}")
    for name in ("torch_dtype", "dtype"):
        if cfg.get(name) is not None and not isinstance(cfg[name], str):
            raise ConfigError(f"{path}: {name!r} must be a JSON string such as \"bfloat16\", got {shown(cfg[name])}")
    _check_rope_scaling(cfg, path)
