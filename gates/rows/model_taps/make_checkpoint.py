"""A random-weight Qwen3 checkpoint in the Hugging Face layout (config.json + model.safetensors, float32) for a given
geometry and seed, which the Python port, the float64 oracle and HF transformers all load (spec/model-taps.md).

    python -m gates.rows.model_taps.make_checkpoint --layers 3 --hidden 64 --heads 8 --kv-heads 2 --head-dim 8 \
        --ffn 128 --vocab 160 --seed 1 --out DIR [--tied]

Deterministic: each tensor is drawn from numpy's PCG64 seeded with (seed, crc32 of its HF name), so the same seed
rewrites the same bytes, and a model with fewer layers holds the same first layers as a deeper one of the same
widths. Scales keep a greedy decode varied rather than repeating one id: projections N(0, 1/fan_in), the residual
branches' output projections (o_proj, down_proj) at BRANCH_GAIN times that, norm weights 1 + N(0, 0.1²), the
vocabulary matrices N(0, 0.5²) (the scales of gates/rows/backend_distributed_tp/fixtures/make_qwen3_tiny.py).
`load_checkpoint(dir)` reads such a directory (or a real Qwen3 one) back as (config mapping, weights), the config in
the keys of the tp-model-greedy and decoder-taps operations (layers, hidden, num_heads, ...).
"""
from __future__ import annotations

import argparse
import json
import sys
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

BRANCH_GAIN = 4.0  # o_proj and down_proj: the residual branches outweigh the token's own embedding
CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.safetensors"

# geometry field -> its flag; the operation's config key <- the HF config.json key
FLAGS = {"layers": "--layers", "hidden": "--hidden", "num_heads": "--heads", "num_kv_heads": "--kv-heads",
         "head_dim": "--head-dim", "ffn": "--ffn", "vocab": "--vocab", "max_position": "--max-position",
         "rms_norm_eps": "--rms-norm-eps", "rope_theta": "--rope-theta"}
HF_KEYS = {"layers": "num_hidden_layers", "hidden": "hidden_size", "num_heads": "num_attention_heads",
           "num_kv_heads": "num_key_value_heads", "head_dim": "head_dim", "ffn": "intermediate_size",
           "vocab": "vocab_size", "max_position": "max_position_embeddings", "rms_norm_eps": "rms_norm_eps",
           "tie_word_embeddings": "tie_word_embeddings"}
LAYER_TENSORS = ("input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                 "self_attn.q_norm", "self_attn.k_norm", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
                 "mlp.down_proj")


class CheckpointError(ValueError):
    """A geometry the generator cannot build, or a checkpoint directory that cannot be read: the message names the
    flag, key or file and the value."""


@dataclass(frozen=True)
class Geometry:
    """A Qwen3 decoder's sizes and constants, in the operation's config keys (the TP row's ModelConfig fields)."""

    layers: int
    hidden: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tie_word_embeddings: bool = False
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position: int = 128

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "num_heads", "num_kv_heads", "head_dim", "ffn", "vocab", "max_position"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CheckpointError(f"{FLAGS[name]} must be a whole number >= 1, got {value!r}")
        if self.num_heads % self.num_kv_heads:
            raise CheckpointError(f"--heads {self.num_heads} is not a multiple of --kv-heads {self.num_kv_heads} "
                                  f"(each KV head serves a whole group of query heads)")
        if self.head_dim % 2:
            raise CheckpointError(f"--head-dim {self.head_dim} must be even (neox RoPE rotates pairs of dimensions)")
        if not self.rms_norm_eps > 0 or not np.isfinite(self.rms_norm_eps):
            raise CheckpointError(f"--rms-norm-eps must be a finite number > 0, got {self.rms_norm_eps!r}")
        if not self.rope_theta > 1 or not np.isfinite(self.rope_theta):
            raise CheckpointError(f"--rope-theta must be a finite number > 1, got {self.rope_theta!r}")

    def config(self) -> dict[str, Any]:
        """The operation's config mapping (tp-model-greedy, decoder-taps)."""
        return asdict(self)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor of the checkpoint, HF-named, in the checkpoint's order; lm_head.weight only when untied."""
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        layer = (("input_layernorm", (self.hidden,)), ("self_attn.q_proj", (q, self.hidden)),
                 ("self_attn.k_proj", (kv, self.hidden)), ("self_attn.v_proj", (kv, self.hidden)),
                 ("self_attn.o_proj", (self.hidden, q)), ("self_attn.q_norm", (self.head_dim,)),
                 ("self_attn.k_norm", (self.head_dim,)), ("post_attention_layernorm", (self.hidden,)),
                 ("mlp.gate_proj", (self.ffn, self.hidden)), ("mlp.up_proj", (self.ffn, self.hidden)),
                 ("mlp.down_proj", (self.hidden, self.ffn)))
        shapes = {"model.embed_tokens.weight": (self.vocab, self.hidden)}
        for index in range(self.layers):
            shapes.update({f"model.layers.{index}.{name}.weight": shape for name, shape in layer})
        shapes["model.norm.weight"] = (self.hidden,)
        if not self.tie_word_embeddings:
            shapes["lm_head.weight"] = (self.vocab, self.hidden)
        return shapes

    def hf_config(self) -> dict[str, Any]:
        """config.json as transformers 5 writes a Qwen3ForCausalLM's (rope_parameters, dtype)."""
        return {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
                **{hf: getattr(self, name) for name, hf in HF_KEYS.items()},
                "hidden_act": "silu", "attention_bias": False, "attention_dropout": 0.0,
                "rope_parameters": {"rope_type": "default", "rope_theta": self.rope_theta},
                "use_sliding_window": False, "sliding_window": None, "layer_types": ["full_attention"] * self.layers,
                "use_cache": True, "dtype": "float32"}


def draw(seed: int, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The float32 tensor ``name``: a norm weight near 1, a vocabulary matrix at std 0.5, a projection at std
    fan_in^-1/2 (o_proj and down_proj at BRANCH_GAIN times that)."""
    normal = np.random.Generator(np.random.PCG64([seed, zlib.crc32(name.encode())])).standard_normal(shape)
    if len(shape) == 1:
        return (1.0 + 0.1 * normal).astype(np.float32)
    if name in ("model.embed_tokens.weight", "lm_head.weight"):
        scale = 0.5
    elif name.endswith(("o_proj.weight", "down_proj.weight")):
        scale = BRANCH_GAIN * shape[1] ** -0.5
    else:
        scale = shape[1] ** -0.5
    return (scale * normal).astype(np.float32)


def weights(geometry: Geometry, seed: int) -> dict[str, np.ndarray]:
    """Every tensor of the checkpoint of ``geometry`` drawn from ``seed`` (an int >= 0)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise CheckpointError(f"--seed must be a whole number >= 0, got {seed!r}")
    return {name: draw(seed, name, shape) for name, shape in geometry.shapes().items()}


def write_checkpoint(geometry: Geometry, seed: int, out: Path | str) -> Path:
    """Write ``out``/config.json and ``out``/model.safetensors (the directory made if missing); returns ``out``."""
    from safetensors.numpy import save_file

    tensors = weights(geometry, seed)
    directory = Path(out)
    if directory.exists() and not directory.is_dir():
        raise CheckpointError(f"--out {str(directory)!r} exists and is not a directory")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / CONFIG_FILE).write_text(json.dumps(geometry.hf_config(), indent=2) + "\n")
    # one metadata key: safetensors writes a map's keys in no fixed order, and the same seed must give the same bytes
    save_file(tensors, str(directory / WEIGHTS_FILE), metadata={"format": "pt"})
    return directory


def _hf_value(config: dict[str, Any], key: str, where: Path) -> Any:
    if key not in config:
        raise CheckpointError(f"{where}: no {key!r} (a Qwen3 config.json names it)")
    return config[key]


def read_config(path: Path | str) -> dict[str, Any]:
    """The operation's config mapping of a Qwen3 config.json (rope_theta from rope_parameters, as transformers 5
    writes it, or at the top level, as older configs do; head_dim defaults to hidden_size / num_attention_heads)."""
    where = Path(path)
    try:
        config = json.loads(where.read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{where}: cannot be read as JSON: {exc}") from exc
    if not isinstance(config, dict) or config.get("model_type") != "qwen3":
        found = config.get("model_type") if isinstance(config, dict) else type(config).__name__
        raise CheckpointError(f"{where}: model_type must be 'qwen3', got {found!r}")
    rope = config.get("rope_parameters") or {"rope_type": "default", "rope_theta": _hf_value(config, "rope_theta", where)}
    if rope.get("rope_type", "default") != "default":
        raise CheckpointError(f"{where}: rope_parameters.rope_type {rope.get('rope_type')!r} is not supported "
                              f"(the decoder applies plain neox RoPE: 'default')")
    if config.get("use_sliding_window"):
        raise CheckpointError(f"{where}: use_sliding_window is true; the decoder attends to every earlier position")
    values = {name: _hf_value(config, hf, where) for name, hf in HF_KEYS.items() if name != "head_dim"}
    values["head_dim"] = config.get("head_dim") or values["hidden"] // values["num_heads"]
    values["rope_theta"] = float(rope["rope_theta"])
    values["rms_norm_eps"] = float(values["rms_norm_eps"])
    try:
        return Geometry(**values).config()
    except CheckpointError as exc:
        raise CheckpointError(f"{where}: {exc}") from exc


def read_weights(path: Path | str) -> dict[str, np.ndarray]:
    """Every tensor of a .safetensors file as a numpy array, in the file's dtype (bfloat16 as ml_dtypes.bfloat16)."""
    from safetensors import safe_open

    where = Path(path)
    if not where.is_file():
        raise CheckpointError(f"{where}: no such file (a single-file checkpoint holds {WEIGHTS_FILE})")
    tensors = {}
    with safe_open(str(where), framework="pt") as handle:
        for name in handle.keys():
            tensor = handle.get_tensor(name)
            if str(tensor.dtype) == "torch.bfloat16":
                import ml_dtypes
                import torch

                tensors[name] = tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
            else:
                tensors[name] = tensor.numpy()
    return tensors


def load_checkpoint(directory: Path | str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(config mapping in the operation's keys, HF-named weights) of a checkpoint directory."""
    root = Path(directory)
    return read_config(root / CONFIG_FILE), read_weights(root / WEIGHTS_FILE)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gates.rows.model_taps.make_checkpoint",
                                     description=__doc__.split("\n\n")[0])
    for name in ("layers", "hidden", "num_heads", "num_kv_heads", "head_dim", "ffn", "vocab"):
        parser.add_argument(FLAGS[name], dest=name, type=int, required=True)
    parser.add_argument("--tied", action="store_true", help="tie lm_head to embed_tokens (no lm_head.weight)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True, help="the checkpoint directory (made if missing)")
    parser.add_argument("--rms-norm-eps", dest="rms_norm_eps", type=float, default=1e-6)
    parser.add_argument("--rope-theta", dest="rope_theta", type=float, default=10000.0)
    parser.add_argument("--max-position", dest="max_position", type=int, default=128)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Write the checkpoint the flags describe; a geometry it cannot build exits 2 with the flag and value named."""
    parser = _parser()
    args = parser.parse_args(argv)
    sizes = {name: getattr(args, name) for name in FLAGS}
    try:
        out = write_checkpoint(Geometry(**sizes, tie_word_embeddings=args.tied), args.seed, args.out)
    except CheckpointError as exc:
        parser.error(str(exc))
    print(f"wrote {out / CONFIG_FILE} and {out / WEIGHTS_FILE} (seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
