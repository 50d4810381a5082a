"""A GPT-2 124M-style decoder (pre-norm, tied embeddings, scaled_dot_product_attention) on random tokens.

``data: synthetic`` (the default) makes each batch of tokens on the device; ``data: host`` samples
windows of a seeded int32 token stream in host memory through the trial's DataLoader, widened to
int64 on the device (:mod:`autotune.workloads.hostdata`).

Two workload params swap in our Triton kernels (:mod:`autotune.kernels`), so a space can weigh them
against torch's and tune their configs (``search_spaces/gpt2_kernels.yaml``):

- ``norm="triton"``: every LayerNorm (``ln1``, ``ln2``, ``ln_f``) is a
  :class:`~autotune.kernels.layernorm.TritonLayerNorm`, with the same parameters and state_dict;
- ``head="fused"``: the model returns the final hidden states and the loss is
  :func:`~autotune.kernels.cross_entropy.fused_linear_cross_entropy` of them and the (still tied) head
  weight, :data:`HEAD_CHUNK` tokens at a time, so the ``tokens x vocab`` logits never exist whole.

The defaults (``torch``, ``torch``) are the plain model, and import no Triton.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from autotune.workloads import Workload, hostdata

__all__ = ["GPT", "HEADS", "HEAD_CHUNK", "NORMS", "GPTConfig", "build"]

NORMS = ("torch", "triton")  # LayerNorm: nn.LayerNorm, or autotune.kernels.layernorm's Triton kernels
HEADS = ("torch", "fused")  # LM head and loss: logits then F.cross_entropy, or the fused chunked kernel
#: Tokens per chunk of the fused head (read at each call, so a test may lower it to exercise chunking).
HEAD_CHUNK = 4096


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
# Tokens in the host stream of data=host: 4M at full (16 MB of int32), 256 full batches of 16 x 1024.
HOST_TOKENS = {"full": 4 * 2**20, "small": 2**20, "tiny": 2**16}


def _check_choice(name: str, value: str, options: tuple[str, ...]) -> None:
    hostdata.check_choice("gpt2", name, value, options)


def _layer_norm_class(norm: str) -> type[nn.LayerNorm]:
    _check_choice("norm", norm, NORMS)
    if norm == "triton":
        from autotune.kernels.layernorm import TritonLayerNorm  # imports Triton: only when asked for

        return TritonLayerNorm
    return nn.LayerNorm


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig, norm: str = "torch") -> None:
        super().__init__()
        layer_norm = _layer_norm_class(norm)
        self.heads = cfg.heads
        self.ln1 = layer_norm(cfg.dim)
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)
        self.proj = nn.Linear(cfg.dim, cfg.dim)
        self.ln2 = layer_norm(cfg.dim)
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
    """The decoder; ``forward`` returns logits, or with ``return_hidden`` the final hidden states (``head`` unused)."""

    # What compile_scope=blocks compiles one by one (autotune.knobs.regional): the transformer layers, one graph for
    # all.
    _repeated_blocks = ("Block",)

    def __init__(self, cfg: GPTConfig, norm: str = "torch", return_hidden: bool = False) -> None:
        super().__init__()
        self.return_hidden = return_hidden
        self.wte = nn.Embedding(cfg.vocab, cfg.dim)
        self.wpe = nn.Embedding(cfg.seq, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg, norm) for _ in range(cfg.layers))
        self.ln_f = _layer_norm_class(norm)(cfg.dim)
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
        x = self.ln_f(x)
        return x if self.return_hidden else self.head(x)


def _lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def _fused_lm_loss(model: GPT) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    from autotune.kernels.cross_entropy import fused_linear_cross_entropy  # imports Triton: only when asked for

    def loss(hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        # model.head.weight is read at each call: it is the tied embedding, whatever wraps the model later.
        flat = hidden.reshape(-1, hidden.shape[-1])
        return fused_linear_cross_entropy(flat, model.head.weight, targets.reshape(-1), chunk=HEAD_CHUNK)

    return loss


def build(preset: str = "full", norm: str = "torch", head: str = "torch", data: str = "synthetic") -> Workload:
    """GPT-2 next-token prediction on random token sequences; throughput in tokens/s.

    ``norm`` (``torch`` | ``triton``) and ``head`` (``torch`` | ``fused``) choose torch's layers or our
    Triton kernels (see the module docstring); ``data`` is ``synthetic`` (tokens made on the device)
    or ``host`` (a Dataset the trial loads). Bad values raise :class:`AutotuneError`.
    """
    _check_choice("norm", norm, NORMS)
    _check_choice("head", head, HEADS)
    _check_choice("data", data, hostdata.DATA_MODES)
    cfg = PRESETS[preset]
    model = GPT(cfg, norm=norm, return_hidden=head == "fused")
    loss_fn = _fused_lm_loss(model) if head == "fused" else _lm_loss
    if data == "host":
        pipeline = hostdata.token_pipeline(HOST_TOKENS[preset], cfg.vocab, cfg.seq)
        return Workload(
            model,
            loss_fn=loss_fn,
            default_batch_size=cfg.batch,
            items_per_sample=cfg.seq,
            unit="tokens/s",
            dataset=pipeline.dataset,
            device_transform=pipeline.device_transform,
        )

    def make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(0, cfg.vocab, (batch_size, cfg.seq + 1), device=device)
        return tokens[:, :-1], tokens[:, 1:]

    return Workload(model, make_batch, loss_fn, default_batch_size=cfg.batch, items_per_sample=cfg.seq, unit="tokens/s")


# What an expert tries first on a GPU (the sweep's informed start, autotune.sweep.proposals.informed_start): the fused
# head, whose logits never exist whole (an H100, bf16, compiled, fused AdamW, batch 64: 496,681 tokens/s at 23.6 GiB
# against torch's 374,321 at 59.1 GiB). Not the Triton LayerNorm: alone it beat neither eager nor compiled
# (BENCHMARKS.md).
build.informed_start = {"head": "fused"}  # type: ignore[attr-defined]
