"""The random-weight Qwen3 checkpoint generator (gates/rows/model_taps/make_checkpoint.py): the HF layout read back by
its loader (and by transformers where installed), deterministic bytes from the seed, a varied greedy decode, and the
geometries it refuses with the flag and value named (exit 2)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from gates.rows.model_taps.make_checkpoint import CheckpointError, Geometry, load_checkpoint, main, write_checkpoint
from oracles.qwen3_reference import greedy_reference

FLAGS = ["--layers", "3", "--hidden", "64", "--heads", "8", "--kv-heads", "2", "--head-dim", "8", "--ffn", "128",
         "--vocab", "160"]
GEOMETRY = Geometry(layers=3, hidden=64, num_heads=8, num_kv_heads=2, head_dim=8, ffn=128, vocab=160)


def _files(directory):
    return {name: (directory / name).read_bytes() for name in ("config.json", "model.safetensors")}


def test_the_command_writes_a_checkpoint_its_loader_reads_back(tmp_path, capsys):
    assert main([*FLAGS, "--seed", "5", "--out", str(tmp_path / "ck")]) == 0
    assert "model.safetensors (seed 5)" in capsys.readouterr().out
    config, weights = load_checkpoint(tmp_path / "ck")
    assert config == {"layers": 3, "hidden": 64, "num_heads": 8, "num_kv_heads": 2, "head_dim": 8, "ffn": 128,
                      "vocab": 160, "tie_word_embeddings": False, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
                      "max_position": 128}
    assert {name: tensor.shape for name, tensor in weights.items()} == GEOMETRY.shapes()
    assert {tensor.dtype for tensor in weights.values()} == {np.dtype("float32")}
    hf = json.loads((tmp_path / "ck" / "config.json").read_text())
    assert (hf["model_type"], hf["architectures"], hf["dtype"]) == ("qwen3", ["Qwen3ForCausalLM"], "float32")
    assert hf["rope_parameters"] == {"rope_type": "default", "rope_theta": 10000.0}
    assert (hf["num_hidden_layers"], hf["num_attention_heads"], hf["num_key_value_heads"]) == (3, 8, 2)


def test_tied_leaves_lm_head_out(tmp_path):
    write_checkpoint(Geometry(**{**GEOMETRY.config(), "tie_word_embeddings": True}), 5, tmp_path)
    config, weights = load_checkpoint(tmp_path)
    assert config["tie_word_embeddings"] is True
    assert "lm_head.weight" not in weights and "model.embed_tokens.weight" in weights


def test_the_same_seed_writes_the_same_bytes_and_another_seed_other_weights(tmp_path):
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        write_checkpoint(GEOMETRY, seed, tmp_path / name)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    _, first = load_checkpoint(tmp_path / "a")
    _, other = load_checkpoint(tmp_path / "c")
    assert all(not np.array_equal(first[name], other[name]) for name in first)


def test_a_shallower_model_holds_the_same_first_layers(tmp_path):
    write_checkpoint(GEOMETRY, 7, tmp_path / "deep")
    write_checkpoint(Geometry(**{**GEOMETRY.config(), "layers": 2}), 7, tmp_path / "shallow")
    _, deep = load_checkpoint(tmp_path / "deep")
    _, shallow = load_checkpoint(tmp_path / "shallow")
    assert set(shallow) < set(deep)
    assert all(np.array_equal(tensor, deep[name]) for name, tensor in shallow.items())


def test_the_scales_are_the_documented_ones():
    from gates.rows.model_taps.make_checkpoint import weights

    drawn = weights(Geometry(layers=1, hidden=256, num_heads=8, num_kv_heads=2, head_dim=32, ffn=512, vocab=512), 3)
    std = {name: float(np.std(tensor)) for name, tensor in drawn.items()}
    assert std["model.embed_tokens.weight"] == pytest.approx(0.5, rel=0.02)
    assert std["model.layers.0.self_attn.q_proj.weight"] == pytest.approx(256 ** -0.5, rel=0.02)
    assert std["model.layers.0.mlp.down_proj.weight"] == pytest.approx(4 * 512 ** -0.5, rel=0.02)
    assert float(np.mean(drawn["model.norm.weight"])) == pytest.approx(1.0, abs=0.03)
    assert std["model.norm.weight"] == pytest.approx(0.1, rel=0.15)


def test_a_greedy_decode_of_a_generated_model_is_varied(tmp_path):
    """The scales' purpose: the float64 oracle's 24 greedy steps are not one id repeated, and no step is a near tie."""
    write_checkpoint(GEOMETRY, 1, tmp_path)
    config, weights = load_checkpoint(tmp_path)
    decoded = greedy_reference(config, weights, np.array([3, 159, 64, 0, 77, 120, 17, 101]), steps=24)
    assert len(set(decoded["tokens"].tolist())) >= 8
    assert decoded["top2_margin"].min() > 1e-3


@pytest.mark.parametrize(("change", "message"), [
    (["--heads", "6", "--kv-heads", "4"], "--heads 6 is not a multiple of --kv-heads 4"),
    (["--head-dim", "7"], "--head-dim 7 must be even"),
    (["--layers", "0"], "--layers must be a whole number >= 1, got 0"),
    (["--vocab", "-3"], "--vocab must be a whole number >= 1, got -3"),
    (["--ffn", "0"], "--ffn must be a whole number >= 1, got 0"),
    (["--seed", "-1"], "--seed must be a whole number >= 0, got -1"),
    (["--rope-theta", "1"], "--rope-theta must be a finite number > 1, got 1.0"),
])
def test_a_geometry_it_cannot_build_exits_2_naming_the_flag(tmp_path, capsys, change, message):
    flags = [*FLAGS, "--seed", "1", "--out", str(tmp_path / "ck")]
    for flag, value in zip(change[::2], change[1::2]):
        if flag in flags:
            flags[flags.index(flag) + 1] = value
        else:
            flags += [flag, value]
    with pytest.raises(SystemExit) as exited:
        main(flags)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "ck").exists()


def test_an_out_path_that_is_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit) as exited:
        main([*FLAGS, "--seed", "1", "--out", str(tmp_path / "file")])
    assert exited.value.code == 2
    assert "exists and is not a directory" in capsys.readouterr().err


def test_the_loader_names_what_it_cannot_read(tmp_path):
    write_checkpoint(GEOMETRY, 1, tmp_path)
    hf = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**hf, "model_type": "llama"}))
    with pytest.raises(CheckpointError, match=r"config\.json: model_type must be 'qwen3', got 'llama'"):
        load_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**hf, "num_key_value_heads": 3}))
    with pytest.raises(CheckpointError, match=r"config\.json: --heads 8 is not a multiple of --kv-heads 3"):
        load_checkpoint(tmp_path)
    old_style = {key: value for key, value in hf.items() if key != "rope_parameters"}
    (tmp_path / "config.json").write_text(json.dumps({**old_style, "rope_theta": 1e6}))
    assert load_checkpoint(tmp_path)[0]["rope_theta"] == 1e6
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"model\.safetensors: no such file"):
        load_checkpoint(tmp_path)


def test_transformers_loads_the_checkpoint_as_written(tmp_path):
    """Where transformers is installed: Qwen3ForCausalLM.from_pretrained reads the directory, every tensor as written."""
    from upstream.hf_qwen3 import unavailable_reason

    if unavailable_reason() is not None:
        pytest.skip(unavailable_reason())
    import torch
    from transformers import Qwen3ForCausalLM

    write_checkpoint(GEOMETRY, 1, tmp_path)
    model = Qwen3ForCausalLM.from_pretrained(tmp_path)
    _, weights = load_checkpoint(tmp_path)
    state = model.state_dict()
    assert set(state) == set(weights)
    assert all(torch.equal(state[name], torch.from_numpy(tensor)) for name, tensor in weights.items())
    assert (model.config.num_hidden_layers, model.config.head_dim, model.config.rope_parameters["rope_theta"]) == \
        (3, 8, 10000.0)
