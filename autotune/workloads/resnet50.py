"""ResNet-50 (He et al. 2015, torchvision's v1.5 layout) in plain torch, on synthetic or host images.

``data: synthetic`` (the default, for model-only tuning) makes each batch of random images on the
device. ``data: host`` trains from uint8 images in host memory through the trial's DataLoader, with
random crop, flip and ImageNet normalisation; ``augment`` (cpu | gpu) says where those run and
``fetch`` (sample | batch) how a batch is gathered (see :mod:`autotune.workloads.hostdata`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from autotune.workloads import Workload, hostdata

__all__ = ["ResNet", "build"]


@dataclass(frozen=True)
class _Size:
    layers: tuple[int, int, int, int]
    width: int
    image: int
    classes: int
    batch: int


# full is the real ResNet-50; small keeps its depth at a quarter of the pixels; tiny runs in seconds on a CPU.
PRESETS = {
    "full": _Size((3, 4, 6, 3), 64, 224, 1000, 128),
    "small": _Size((3, 4, 6, 3), 64, 112, 1000, 64),
    "tiny": _Size((1, 1, 1, 1), 8, 32, 10, 8),
}
# Images in the host pool of data=host: 2048 at full is 400 MB of uint8 3 x 256 x 256 (made in a second or two).
HOST_POOL = {"full": 2048, "small": 2048, "tiny": 64}


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_ch: int, width: int, stride: int) -> None:
        super().__init__()
        out_ch = width * self.expansion
        self.conv1 = nn.Conv2d(in_ch, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)  # stride here: v1.5
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_ch, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.downsample: nn.Module = nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.downsample(x))


class ResNet(nn.Module):
    """Names no blocks for ``compile_scope=blocks``: its stages differ (widths, and a first bottleneck that strides and
    projects), so the largest set of identical blocks is stage 3's last 5 of 16 bottlenecks
    (autotune.knobs.regional finds them). Compiled so, a training step was slower than eager on an H100; every
    bottleneck compiled, 8 graphs took longer than the whole model (BENCHMARKS.md). ``search_spaces/resnet50.yaml``
    does not search the scope."""

    def __init__(self, layers: tuple[int, ...], width: int = 64, classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages: list[nn.Module] = []
        in_ch = width
        for index, blocks in enumerate(layers):
            stage_width = width * 2**index
            for block in range(blocks):
                stride = 2 if index > 0 and block == 0 else 1
                stages.append(Bottleneck(in_ch, stage_width, stride))
                in_ch = stage_width * Bottleneck.expansion
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(in_ch, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build(preset: str = "full", data: str = "synthetic", augment: str = "cpu", fetch: str = "sample") -> Workload:
    """ResNet-50 image classification on random images and labels.

    ``data`` is ``synthetic`` (batches made on the device) or ``host`` (a Dataset the trial loads);
    ``augment`` and ``fetch`` shape the host pipeline and change nothing with synthetic data. Bad
    values raise :class:`AutotuneError`.
    """
    hostdata.check_choice("resnet50", "data", data, hostdata.DATA_MODES)
    hostdata.check_choice("resnet50", "augment", augment, hostdata.AUGMENTS)
    hostdata.check_choice("resnet50", "fetch", fetch, hostdata.FETCHES)
    size = PRESETS[preset]
    model = ResNet(size.layers, size.width, size.classes)
    if data == "host":
        pipeline = hostdata.image_pipeline(HOST_POOL[preset], size.image, size.classes, augment, fetch)
        return Workload(
            model,
            loss_fn=F.cross_entropy,
            default_batch_size=size.batch,
            unit="images/s",
            dataset=pipeline.dataset,
            collate_fn=pipeline.collate_fn,
            device_transform=pipeline.device_transform,
        )

    def make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        images = torch.randn(batch_size, 3, size.image, size.image, device=device)
        labels = torch.randint(0, size.classes, (batch_size,), device=device)
        return images, labels

    return Workload(model, make_batch, F.cross_entropy, default_batch_size=size.batch, unit="images/s")


# What an expert tries first on a GPU (the sweep's informed start, autotune.sweep.proposals.informed_start): behind the
# host loader, whole-batch uint8 fetches augmented on the GPU (an H100, 4 workers: 4,754 images/s against 3,244 with
# 8 workers fetching and augmenting per image; search_spaces/resnet50_data.yaml). No-ops with synthetic data.
build.informed_start = {"augment": "gpu", "fetch": "batch"}  # type: ignore[attr-defined]
