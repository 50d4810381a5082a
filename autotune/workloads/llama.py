"""A Llama decoder (RMSNorm, SwiGLU, rotary positions, grouped-query attention) on random tokens.

The model is Hugging Face transformers' ``LlamaForCausalLM``, built from a ``LlamaConfig`` with fresh random
weights (nothing is downloaded), with ``attn_implementation="sdpa"``: attention is
``torch.nn.functional.scaled_dot_product_attention``, so the backend PyTorch picks for it (flash, cuDNN,
memory-efficient) is the trial's to choose. Batches are random tokens made on the device, as gpt2's.

Presets, by the model whose shapes they take (``PRESETS``):

- ``tiny``: two narrow layers, a CPU trial in seconds;
- ``125m`` (alias ``small``): GPT-2 small's width and depth (768 x 12) in Llama's form, Llama 2's 32,000-token
  vocabulary, embeddings untied: 124.7M parameters;
- ``1b`` (alias ``full``): Llama 3.2 1B: 2048 wide, 16 layers, 32 heads sharing 8 key/value heads, SwiGLU 8192,
  Llama 3's 128,256-token vocabulary with the embedding tied to the LM head, as that model ships: 1.24B
  parameters. The vocabulary is Llama 3's because a Llama trained today uses it: its LM head is a fifth of
  the step's FLOPs, and a 32,000-token head would make the step look cheaper than the real one;
- ``3b``: Llama 3.2 3B's shapes (3072 wide, 24 heads, 8 key/value heads, SwiGLU 8192, tied 128,256
  vocabulary) at 16 layers, where that model has 28: 2.01B parameters, the configuration measured by hand
  with FP8 (BENCHMARKS.md). ``layers=28`` is Llama 3.2 3B itself: 3.21B.

``seq`` (tokens per sequence, default the preset's: 2048 for ``1b`` and ``3b``) and ``layers`` change the
preset's sequence length and depth.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from autotune.errors import AutotuneError
from autotune.quiet import quiet_torchao_import
from autotune.workloads import Workload, positive_size

__all__ = ["ALIASES", "PRESETS", "PRESET_NAMES", "LlamaShape", "build", "llama_config", "make_model", "shape_of"]


@dataclass(frozen=True)
class LlamaShape:
    """A Llama decoder's shapes, and the batch it trains on by default."""

    layers: int
    dim: int
    heads: int
    kv_heads: int  # key/value heads, each shared by heads // kv_heads query heads (grouped-query attention)
    ffn: int  # SwiGLU's hidden width
    vocab: int
    tied: bool  # the LM head is the token embedding
    seq: int
    batch: int


PRESETS = {
    "tiny": LlamaShape(layers=2, dim=64, heads=4, kv_heads=2, ffn=176, vocab=512, tied=False, seq=64, batch=4),
    "125m": LlamaShape(layers=12, dim=768, heads=12, kv_heads=4, ffn=2048, vocab=32000, tied=False, seq=1024, batch=16),
    "1b": LlamaShape(layers=16, dim=2048, heads=32, kv_heads=8, ffn=8192, vocab=128256, tied=True, seq=2048, batch=8),
    "3b": LlamaShape(layers=16, dim=3072, heads=24, kv_heads=8, ffn=8192, vocab=128256, tied=True, seq=2048, batch=8),
}
# The sizes every built-in workload takes, as this one names them (``--preset`` defaults to full).
ALIASES = {"small": "125m", "full": "1b"}
#: Every preset this workload takes: its own sizes, and the shared names as aliases.
PRESET_NAMES = ("tiny", *ALIASES, *(name for name in PRESETS if name != "tiny"))


def shape_of(preset: str, seq: Any = None, layers: Any = None) -> LlamaShape:
    """The preset's shapes (an alias resolved), with ``seq`` and ``layers`` where given."""
    name = ALIASES.get(preset, preset)
    if name not in PRESETS:
        raise AutotuneError(f"preset {preset!r} is not valid: expected one of {', '.join(PRESET_NAMES)}")
    shape = PRESETS[name]
    seq_len, depth = positive_size("llama", "seq", seq), positive_size("llama", "layers", layers)
    return replace(shape, seq=seq_len or shape.seq, layers=depth or shape.layers)


def llama_config(shape: LlamaShape) -> Any:
    """transformers' ``LlamaConfig`` for ``shape``, attention through ``scaled_dot_product_attention``."""
    transformers = _transformers()
    return transformers.LlamaConfig(
        vocab_size=shape.vocab,
        hidden_size=shape.dim,
        intermediate_size=shape.ffn,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=shape.seq,
        tie_word_embeddings=shape.tied,
        use_cache=False,  # training: no key/value cache
        attn_implementation="sdpa",
    )


def make_model(shape: LlamaShape) -> nn.Module:
    """A ``LlamaForCausalLM`` of ``shape`` with fresh random weights, on the current default device."""
    with quiet_torchao_import():  # transformers imports torchao where it is installed: its warnings say nothing here
        model: nn.Module = _transformers().LlamaForCausalLM(llama_config(shape))
    return model


def _transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise AutotuneError("workload llama needs Hugging Face transformers: pip install transformers") from None
    return transformers


def _lm_loss(outputs: Any, targets: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy of the model's logits (its output, or the ``logits`` of transformers' output)."""
    logits = getattr(outputs, "logits", outputs)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def build(preset: str = "full", seq: int | None = None, layers: int | None = None) -> Workload:
    """Llama next-token prediction on random token sequences; throughput in tokens/s.

    ``seq`` and ``layers`` override the preset's sequence length and depth (see the module docstring); bad
    values, an unknown preset or transformers missing raise :class:`AutotuneError`.
    """
    shape = shape_of(preset, seq, layers)
    model = make_model(shape)

    def make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(0, shape.vocab, (batch_size, shape.seq + 1), device=device)
        return tokens[:, :-1], tokens[:, 1:]

    return Workload(
        model, make_batch, _lm_loss, default_batch_size=shape.batch, items_per_sample=shape.seq, unit="tokens/s"
    )


# What autotune.workloads.presets reads: the space's validation and the trial take these presets.
build.presets = PRESET_NAMES  # type: ignore[attr-defined]
