"""Tap dumps (docs/divergence.md, "Recording a reference"): a reference's taps in one .safetensors with the ids and
the weights' fingerprint; read back bit for bit in forward order; refused on other ids or weights, naming both."""
from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from _vllm_gates.base.errors import Location
from _vllm_gates.definitions.model import Taps
from _vllm_gates.definitions.safetensors_file import read_metadata
from _vllm_gates.taps.divergence import localize
from _vllm_gates.values.policies import Policy
from _vllm_gates.values.tolerance import CHUNK
from _vllm_gates.taps.tap_dumps import FORMAT, TapDumpError, TapFile, check_dump, read_dump, spill, weights_fingerprint, \
    write_dump

pytestmark = pytest.mark.cpu

IDS = np.array([3, 1, 4, 1, 5], dtype=np.int64)


def weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {"model.embed_tokens.weight": rng.standard_normal((16, 4)).astype(np.float32),
            "model.layers.0.mlp.up_proj.weight": rng.standard_normal((8, 4)).astype(ml_dtypes.bfloat16)}


def taps() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(8)
    return {"embed": rng.standard_normal((5, 4)), "layers.0.attn.in": rng.standard_normal((5, 4)).astype(np.float32),
            "layers.0.out": rng.standard_normal((5, 4)).astype(ml_dtypes.bfloat16),
            "logits": rng.standard_normal((5, 16)).astype(np.float32)}


def test_a_dump_round_trips_bit_for_bit_in_forward_order(tmp_path: Path) -> None:
    path = tmp_path / "ref.safetensors"
    write_dump(path, taps(), IDS, weights(), "oracle oracles.qwen3_reference:decoder_taps")
    dump = read_dump(path)
    assert list(dump.taps) == list(taps())
    for name, value in taps().items():
        assert dump.taps[name].dtype == value.dtype and dump.taps[name].shape == value.shape
        assert dump.taps[name].tobytes() == value.tobytes()
    assert dump.ids == (3, 1, 4, 1, 5)
    assert dump.fingerprint == weights_fingerprint(weights())
    assert dump.source == "oracle oracles.qwen3_reference:decoder_taps"
    metadata = read_metadata(path)
    assert metadata["format"] == FORMAT and json.loads(metadata["ids"]) == [3, 1, 4, 1, 5]
    check_dump(dump, IDS, weights(), "--against ref.safetensors")  # the same case: accepted


def test_the_fingerprint_covers_names_dtypes_shapes_and_bytes() -> None:
    base = weights_fingerprint(weights())
    assert base == weights_fingerprint(dict(reversed(list(weights().items()))))  # sorted names: order does not count
    renamed = weights()
    renamed["model.embed_tokens.weight2"] = renamed.pop("model.embed_tokens.weight")
    recast = weights()
    recast["model.embed_tokens.weight"] = recast["model.embed_tokens.weight"].view(np.int32)
    reshaped = weights()
    reshaped["model.embed_tokens.weight"] = reshaped["model.embed_tokens.weight"].reshape(4, 16)
    nudged = weights()
    nudged["model.embed_tokens.weight"] = nudged["model.embed_tokens.weight"].copy()
    nudged["model.embed_tokens.weight"][3, 2] = np.nextafter(nudged["model.embed_tokens.weight"][3, 2], np.float32(9))
    found = {weights_fingerprint(w) for w in (renamed, recast, reshaped, nudged)}
    assert base not in found and len(found) == 4


def test_a_dump_of_other_ids_is_refused_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "ref.safetensors"
    write_dump(path, taps(), IDS, weights(), "oracle")
    with pytest.raises(TapDumpError) as error:
        check_dump(read_dump(path), np.array([3, 1, 4, 1, 6]), weights(), "--against ref.safetensors")
    assert str(error.value) == ("--against ref.safetensors: the dump was recorded on ids [3, 1, 4, 1, 5], the case has "
                                "ids [3, 1, 4, 1, 6]")


def test_a_dump_of_other_weights_is_refused_naming_both_fingerprints(tmp_path: Path) -> None:
    path = tmp_path / "ref.safetensors"
    write_dump(path, taps(), IDS, weights(), "oracle")
    other = weights()
    other["model.embed_tokens.weight"] = other["model.embed_tokens.weight"] * 2
    with pytest.raises(TapDumpError) as error:
        check_dump(read_dump(path), IDS, other, "--against ref.safetensors")
    text = str(error.value)
    assert f"recorded on weights with sha256 {weights_fingerprint(weights())}" in text
    assert f"the case's weights have sha256 {weights_fingerprint(other)}" in text


def test_a_file_that_is_not_a_dump_or_is_truncated_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ref.safetensors"
    write_dump(path, taps(), IDS, weights(), "oracle")
    data = path.read_bytes()
    (tmp_path / "short.safetensors").write_bytes(data[:-3])
    with pytest.raises(TapDumpError, match=r"short.safetensors: has tensor 'logits' at data offsets \[280, 600\], past the end of its 597 data bytes"):
        read_dump(tmp_path / "short.safetensors")
    header = json.dumps({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    (tmp_path / "plain.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 4)
    with pytest.raises(TapDumpError, match="plain.safetensors: not a tap dump"):
        read_dump(tmp_path / "plain.safetensors")


def test_spilled_taps_are_read_from_disk_when_asked_bit_for_bit_in_forward_order(tmp_path: Path) -> None:
    spilled = spill(taps(), tmp_path / "free.safetensors")
    assert isinstance(spilled, TapFile) and list(spilled) == list(taps()) and len(spilled) == 4
    first, again = spilled["logits"], spilled["logits"]
    assert first is not again and not first.flags.writeable  # a fresh read-only array each time: nothing kept
    for name, value in taps().items():
        assert spilled[name].dtype == value.dtype and spilled[name].tobytes() == value.tobytes()
    write_dump(tmp_path / "ref.safetensors", spilled, IDS, weights(), "oracle")  # a dump written from a tap file
    assert [read_dump(tmp_path / "ref.safetensors").taps[name].tobytes() for name in taps()] == \
        [value.tobytes() for value in taps().values()]


def test_a_tap_file_that_shrinks_after_it_was_opened_is_an_error_naming_the_tap(tmp_path: Path) -> None:
    path = tmp_path / "free.safetensors"
    spilled = spill(taps(), path)
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(TapDumpError, match=r"free.safetensors: tap 'logits' could not be read: ended after 317 of the "
                                           r"320 bytes"):
        spilled["logits"]
    assert spilled["embed"].tobytes() == taps()["embed"].tobytes()


def _many(count: int, elements: int) -> dict[str, np.ndarray]:
    return {f"layers.{i}.out": np.full(elements, i, dtype=np.float32) for i in range(count)}


def test_writing_and_judging_tap_files_holds_one_tap_at_a_time_not_the_whole_model(tmp_path: Path) -> None:
    count, elements = 32, 1 << 18  # 32 taps of 1 MiB a side
    one = 4 * elements
    spilled = {side: spill(_many(count, elements), tmp_path / f"{side}.safetensors") for side in ("ref", "free", "forced")}
    tracemalloc.start()
    try:
        write_dump(tmp_path / "dump.safetensors", spilled["ref"], IDS, weights(), "oracle")
        written = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        found = localize(spilled["ref"], spilled["free"], spilled["forced"],
                         Taps("feed", ("layers.{i}.attn.in",), "layers.{i}.", None, Location("gate.yaml", 1, 1)),
                         Policy("nmse", max=1e-10))
        judged = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not found.broke and len(found.taps) == count
    assert written < 2 * one  # each tap read and written alone, of 32 MiB
    # one pair and the comparison's float64 temporaries of tolerance.CHUNK elements; the three sides are 96 MiB
    assert judged < 2 * one + 12 * 8 * CHUNK < count * one / 2
