"""A GPT-2 124M-style decoder (pre-norm, tied embeddings, scaled_dot_product_attention) on random tokens."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from autotune.workloads import Workload

__all__ = ["GPT", "GPTConfig", "build"]


@dataclass(frozen=True)
class GPTConfig:
    layers: int
    heads: int
    dim: int
    seq: int
    vocab: int
    batch: int


# full is GPT-2 small (124M) with the vocabulary padded from 50257 to a multiple of 64, as is usual for speed.
PRESETS = {
    "full": GPTConfig(12, 12, 768, 1024, 50304, 16),
    "small": GPTConfig(6, 6, 384, 512, 50304, 16),
    "tiny": GPTConfig(2, 2, 64, 64, 512, 4),
}


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(cfg.dim)
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)
        self.proj = nn.Linear(cfg.dim, cfg.dim)
        self.ln2 = nn.LayerNorm(cfg.dim)
        self.fc = nn.Linear(cfg.dim, 4 * cfg.dim)
        self.fc_proj = nn.Linear(4 * cfg.dim, cfg.dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(dim, dim=2)
        q, k, v = (t.view(batch, seq, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, dim))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab, cfg.dim)
        self.wpe = nn.Embedding(cfg.seq, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        self.head.weight = self.wte.weight  # tied, as in GPT-2
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def _lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def build(preset: str = "full") -> Workload:
    """GPT-2 next-token prediction on random token sequences; throughput in tokens/s."""
    cfg = PRESETS[preset]
    model = GPT(cfg)

    def make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(0, cfg.vocab, (batch_size, cfg.seq + 1), device=device)
        return tokens[:, :-1], tokens[:, 1:]

    return Workload(
        model, make_batch, _lm_loss, default_batch_size=cfg.batch, items_per_sample=cfg.seq, unit="tokens/s"
    )
