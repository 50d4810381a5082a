"""A vision transformer classifier (ViT, Dosovitskiy et al. 2020) in plain torch, on random images.

The model is the one timm's ``VisionTransformer`` builds for ``vit_*_patch16_224``: a convolution cuts the image
into patches, a class token and a learned position embedding join them, pre-norm encoder blocks (one ``qkv``
Linear, attention, GELU MLP) follow, and a Linear head reads the class token. Attention is
``torch.nn.functional.scaled_dot_product_attention`` (no ``nn.MultiheadAttention``, which may take its own fused
path), so every kernel the ``attention_backend`` knob pins runs it. The blocks sit in one ``ModuleList``, where
``compile_scope: blocks`` and activation checkpointing find them (:func:`autotune.knobs.regional.find_blocks`).
Batches are random float images and labels made on the device; throughput is in images/s.

Presets (``PRESETS``):

- ``tiny``: 32 x 32 images in 8 x 8 patches, 64 wide, 2 blocks, 10 classes: a CPU trial in seconds;
- ``small``: ViT-S/16: 224 px in 16 px patches, 384 wide, 12 blocks of 6 heads, MLP 1536, 1000 classes (22.1M
  parameters);
- ``full``: ViT-B/16: 224 px, 16 px patches, 768 wide, 12 blocks of 12 heads, MLP 3072, 1000 classes (86.6M).

``image`` (pixels a side) and ``patch`` (pixels a patch side) change the preset's; the image must be a whole number
of patches.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from autotune.errors import AutotuneError
from autotune.workloads import PRESETS as PRESET_NAMES
from autotune.workloads import Workload, positive_size

__all__ = ["PRESETS", "Block", "ViTShape", "VisionTransformer", "build", "shape_of"]


@dataclass(frozen=True)
class ViTShape:
    """A ViT's shapes, and the batch it trains on by default."""

    image: int  # pixels a side of the square input image
    patch: int  # pixels a side of each patch, the stride of the patch embedding
    dim: int
    layers: int
    heads: int
    mlp: int  # the MLP's hidden width
    classes: int
    batch: int

    @property
    def tokens(self) -> int:
        """Tokens a block sees: the patches and the class token."""
        return (self.image // self.patch) ** 2 + 1


# Default batches: a GPU's share of DeiT's recipe for ViT-B (1024 images over 8 GPUs), and twice that for ViT-S, a
# quarter of ViT-B's FLOPs an image; search_spaces/vit.yaml searches around them.
PRESETS = {
    "tiny": ViTShape(image=32, patch=8, dim=64, layers=2, heads=4, mlp=256, classes=10, batch=8),
    "small": ViTShape(image=224, patch=16, dim=384, layers=12, heads=6, mlp=1536, classes=1000, batch=256),
    "full": ViTShape(image=224, patch=16, dim=768, layers=12, heads=12, mlp=3072, classes=1000, batch=128),
}


def shape_of(preset: str, image: Any = None, patch: Any = None) -> ViTShape:
    """The preset's shapes, with ``image`` and ``patch`` where given; bad values raise :class:`AutotuneError`."""
    if preset not in PRESETS:
        raise AutotuneError(f"preset {preset!r} is not valid: expected one of {', '.join(PRESET_NAMES)}")
    shape = PRESETS[preset]
    side, patch_side = positive_size("vit", "image", image), positive_size("vit", "patch", patch)
    shape = replace(shape, image=side or shape.image, patch=patch_side or shape.patch)
    if shape.image % shape.patch:
        raise AutotuneError(
            f"vit: image={shape.image} is not valid with patch={shape.patch}: the image must be a whole number of "
            "patches"
        )
    return shape


class Block(nn.Module):
    """A pre-norm encoder block: ``x + attention(norm1(x))``, then ``x + mlp(norm2(x))``."""

    def __init__(self, shape: ViTShape) -> None:
        super().__init__()
        self.heads = shape.heads
        self.norm1 = nn.LayerNorm(shape.dim, eps=1e-6)
        self.qkv = nn.Linear(shape.dim, 3 * shape.dim)
        self.proj = nn.Linear(shape.dim, shape.dim)
        self.norm2 = nn.LayerNorm(shape.dim, eps=1e-6)
        self.fc1 = nn.Linear(shape.dim, shape.mlp)
        self.fc2 = nn.Linear(shape.mlp, shape.dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        qkv = self.qkv(self.norm1(x)).view(batch, tokens, 3, self.heads, dim // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (batch, heads, tokens, head_dim)
        attn = F.scaled_dot_product_attention(q, k, v)  # every token sees every other: no mask
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, tokens, dim))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class VisionTransformer(nn.Module):
    """Images ``(batch, 3, image, image)`` to class logits ``(batch, classes)``."""

    def __init__(self, shape: ViTShape) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, shape.dim, kernel_size=shape.patch, stride=shape.patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, shape.dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, shape.tokens, shape.dim))
        self.blocks = nn.ModuleList(Block(shape) for _ in range(shape.layers))
        self.norm = nn.LayerNorm(shape.dim, eps=1e-6)
        self.head = nn.Linear(shape.dim, shape.classes)
        self._init_weights()

    def _init_weights(self) -> None:
        """timm's: truncated normal (std 0.02) weights and zero biases for the Linears and the embeddings."""
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.normal_(self.cls_token, std=1e-6)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        patches = self.patch_embed(images).flatten(2).transpose(1, 2)  # (batch, patches, dim)
        cls = self.cls_token.expand(patches.shape[0], -1, -1)
        x = torch.cat([cls, patches], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


def build(preset: str = "full", image: int | None = None, patch: int | None = None) -> Workload:
    """ViT image classification on random images and labels; throughput in images/s.

    ``image`` and ``patch`` override the preset's image and patch sizes (see the module docstring); bad values or an
    unknown preset raise :class:`AutotuneError`.
    """
    shape = shape_of(preset, image, patch)
    model = VisionTransformer(shape)

    def make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        images = torch.randn(batch_size, 3, shape.image, shape.image, device=device)
        labels = torch.randint(0, shape.classes, (batch_size,), device=device)
        return images, labels

    return Workload(model, make_batch, F.cross_entropy, default_batch_size=shape.batch, unit="images/s")


# What autotune.workloads.check_args reads: bad sizes are refused before a trial process starts.
build.check_args = shape_of  # type: ignore[attr-defined]
