"""The profile workload: a small torch decoder from the model geometry, run once at max_num_batched_tokens (MEM-3.8).

Mirrors what `profile_run` / `_dummy_run(max_num_batched_tokens, is_profile=True)` and `_dummy_sampler_run` of
vllm/v1/worker/gpu_model_runner.py put on the device: weights, one forward over the token budget spread over
min(max_num_seqs, tokens) requests, logits of each request's last token and a greedy sample.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from impl.v1.field_checks import check_int


@dataclass(frozen=True)
class DecoderGeometry:
    """The shape of a decoder-only transformer (depth may be reduced for profiling)."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_size: int
    intermediate_size: int
    dtype: torch.dtype

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "num_layers", "num_attention_heads", "num_kv_heads",
                     "head_size", "intermediate_size"):
            check_int("DecoderGeometry", name, getattr(self, name), minimum=1)
        if not isinstance(self.dtype, torch.dtype) or not self.dtype.is_floating_point:
            raise ValueError(f"DecoderGeometry.dtype must be a floating torch.dtype, got {self.dtype!r}")
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError(f"DecoderGeometry.num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                             f"num_kv_heads ({self.num_kv_heads})")


class _RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (x.float() * scale).to(x.dtype) * self.weight


class _DecoderLayer(nn.Module):
    def __init__(self, g: DecoderGeometry) -> None:
        super().__init__()
        self.g = g
        self.input_norm = _RMSNorm(g.hidden_size)
        self.qkv = nn.Linear(g.hidden_size, (g.num_attention_heads + 2 * g.num_kv_heads) * g.head_size, bias=False)
        self.o = nn.Linear(g.num_attention_heads * g.head_size, g.hidden_size, bias=False)
        self.post_norm = _RMSNorm(g.hidden_size)
        self.gate_up = nn.Linear(g.hidden_size, 2 * g.intermediate_size, bias=False)
        self.down = nn.Linear(g.intermediate_size, g.hidden_size, bias=False)

    def _attention(self, x: torch.Tensor, lengths: list[int]) -> torch.Tensor:
        g = self.g
        q, k, v = self.qkv(x).split(
            [g.num_attention_heads * g.head_size, g.num_kv_heads * g.head_size, g.num_kv_heads * g.head_size], dim=-1)
        group = g.num_attention_heads // g.num_kv_heads
        outputs, start = [], 0
        for length, count in _runs(lengths):  # requests of one length are attended as one batch
            stop = start + length * count

            def heads(t: torch.Tensor, n: int) -> torch.Tensor:
                return t[start:stop].view(count, length, n, g.head_size).transpose(1, 2)

            keys = heads(k, g.num_kv_heads).repeat_interleave(group, dim=1)
            values = heads(v, g.num_kv_heads).repeat_interleave(group, dim=1)
            attended = F.scaled_dot_product_attention(heads(q, g.num_attention_heads), keys, values, is_causal=True)
            outputs.append(attended.transpose(1, 2).reshape(length * count, g.num_attention_heads * g.head_size))
            start = stop
        return self.o(torch.cat(outputs) if len(outputs) > 1 else outputs[0])

    def forward(self, x: torch.Tensor, lengths: list[int]) -> torch.Tensor:
        x = x + self._attention(self.input_norm(x), lengths)
        gate, up = self.gate_up(self.post_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


def _runs(lengths: list[int]) -> list[tuple[int, int]]:
    """Consecutive equal lengths as (length, count) pairs."""
    runs: list[tuple[int, int]] = []
    for length in lengths:
        if runs and runs[-1][0] == length:
            runs[-1] = (length, runs[-1][1] + 1)
        else:
            runs.append((length, 1))
    return runs


def split_tokens(num_tokens: int, max_num_seqs: int) -> list[int]:
    """Spread `num_tokens` over min(max_num_seqs, num_tokens) requests, the longer ones first."""
    check_int("split_tokens", "num_tokens", num_tokens, minimum=1)
    check_int("split_tokens", "max_num_seqs", max_num_seqs, minimum=1)
    num_requests = min(max_num_seqs, num_tokens)
    base, extra = divmod(num_tokens, num_requests)
    return [base + 1] * extra + [base] * (num_requests - extra)


class ProfileDecoder(nn.Module):
    """Embedding, `num_layers` pre-norm GQA attention + SwiGLU layers, final norm and an untied LM head."""

    def __init__(self, geometry: DecoderGeometry) -> None:
        super().__init__()
        self.geometry = geometry
        self.embed = nn.Embedding(geometry.vocab_size, geometry.hidden_size)
        self.layers = nn.ModuleList(_DecoderLayer(geometry) for _ in range(geometry.num_layers))
        self.norm = _RMSNorm(geometry.hidden_size)
        self.lm_head = nn.Linear(geometry.hidden_size, geometry.vocab_size, bias=False)

    def forward(self, token_ids: torch.Tensor, lengths: list[int]) -> torch.Tensor:
        """Greedy next token of each request (logits in fp32, as vLLM's sampler computes them)."""
        if token_ids.dim() != 1 or token_ids.numel() != sum(lengths):
            raise ValueError(f"token_ids must be 1-D with sum(lengths) = {sum(lengths)} tokens, got shape "
                             f"{tuple(token_ids.shape)}")
        x = self.embed(token_ids)
        for layer in self.layers:
            x = layer(x, lengths)
        last = torch.tensor(lengths, device=token_ids.device).cumsum(0) - 1
        logits = self.lm_head(self.norm(x[last])).float()
        return torch.softmax(logits, dim=-1).argmax(dim=-1)


def build_profile_decoder(geometry: DecoderGeometry, device: str | torch.device, seed: int = 0) -> ProfileDecoder:
    """The decoder with random weights of `geometry.dtype`, created directly on `device`."""
    if not isinstance(geometry, DecoderGeometry):
        raise TypeError(f"geometry must be a DecoderGeometry, got {type(geometry).__name__}")
    target = torch.device(device)
    cuda_devices = [target.index if target.index is not None else torch.cuda.current_device()] if target.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda_devices):  # the caller's random state is left as it was
        torch.manual_seed(seed)
        with target:
            model = ProfileDecoder(geometry).to(geometry.dtype)
    return model.eval()


def weights_bytes(model: nn.Module) -> int:
    """Bytes of the model's parameters and buffers."""
    tensors = list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


def profile_run(model: ProfileDecoder, max_num_batched_tokens: int, max_num_seqs: int) -> torch.Tensor:
    """One forward over `max_num_batched_tokens` dummy tokens and a greedy sample; returns the sampled ids."""
    lengths = split_tokens(max_num_batched_tokens, max_num_seqs)
    device = next(model.parameters()).device
    with torch.inference_mode():
        token_ids = torch.arange(max_num_batched_tokens, device=device) % model.geometry.vocab_size
        sampled = model(token_ids, lengths)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return sampled
