"""Host-memory data for the built-in workloads' ``data: host`` mode, and the device-side transforms.

What a real input pipeline does, minus decoding (uint8 images held in host memory, as after decoding): the
trial's ``DataLoader`` draws samples from a dataset here, copies each batch to the device, then runs the
workload's ``device_transform`` there.

Images (resnet50): a fixed pool of uint8 images, ``3 x P x P`` with ``P = S + S // 7`` (256 for a
224 crop, the usual resize-then-crop margin), made once from a seeded generator, with int64 labels.
Each sample is a random ``S x S`` crop, flipped left-right half the time, normalised with ImageNet's
mean and std to float32. Where that runs is the ``augment`` param:

- ``cpu``: the dataset crops, flips and normalises (a torchvision-style pipeline; float32 crosses
  to the device, 4 bytes a value);
- ``gpu``: the dataset hands the padded uint8 image and its crop choice (top, left, flip), and
  :class:`DeviceAugment` crops, flips and normalises the whole batch on the device in one gather
  (a 256-side uint8 image is a third of the bytes of its 224-side float32 crop; the host does no
  per-image work beyond picking it, so a whole batch is one ``index_select``).

Crop choices are drawn on the host in both modes, from torch's global generator (each DataLoader
worker has its own seed, as with torchvision's transforms): the same seed then gives the same crops
whichever side applies them, so ``cpu`` and ``gpu`` train on the same distribution (tested to the
value), and the host stays the one place where randomness of the input lives.

``fetch`` is how the loader gathers a batch: ``sample`` (one ``__getitem__`` per image, then
``default_collate`` stacks them) or ``batch`` (:class:`HostImageBatches`: one ``__getitems__`` per
batch, with :func:`whole_batch` as the collate_fn; with ``augment: gpu`` the uint8 batch is one
``index_select`` from the pool, the fastest pipeline measured on an H100).

Tokens (gpt2): a seeded int32 token stream; sample ``i`` is the window ``i .. i + seq`` split into
inputs and next-token targets, widened to int64 on the device by :func:`widen_tokens` (half the bytes
over the bus, as tokenised corpora are stored narrow). The loader's shuffle makes the windows random.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import Dataset

from autotune.errors import AutotuneError

__all__ = [
    "AUGMENTS",
    "DATA_MODES",
    "FETCHES",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "IMAGENET_TRAIN_IMAGES",
    "DeviceAugment",
    "HostImageBatches",
    "HostImages",
    "HostPipeline",
    "HostTokens",
    "ImagePool",
    "check_choice",
    "choose_crops",
    "crop_flip",
    "crop_one",
    "image_pipeline",
    "make_image_pool",
    "normalise",
    "padded_size",
    "token_pipeline",
    "token_stream",
    "whole_batch",
    "widen_tokens",
]

DATA_MODES = ("synthetic", "host")  # batches made on the device (model-only tuning), or host data through a loader
AUGMENTS = ("cpu", "gpu")  # where crop/flip/normalise run
FETCHES = ("sample", "batch")  # one __getitem__ per sample, or one __getitems__ per batch
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# An epoch as long as ImageNet-1k's: a trial never reaches an epoch end (where workers restart and
# the sampler reshuffles), as a real ImageNet job reaches one only every few thousand steps.
IMAGENET_TRAIN_IMAGES = 1_281_167
POOL_SEED = 0  # the same pool and token stream in every trial, so trials compare like with like


def check_choice(workload: str, name: str, value: str, options: Sequence[str]) -> None:
    """Raise :class:`AutotuneError` naming the valid options when ``value`` is not one of them."""
    if value not in options:
        raise AutotuneError(f"{workload}: {name}={value!r} is not valid: expected one of {', '.join(options)}")


@dataclass(frozen=True)
class HostPipeline:
    """What a host-data workload hands the trial beside its model: the Workload's data fields."""

    dataset: Dataset[Any]
    collate_fn: Callable[[Any], Any] | None = None  # None: torch's default_collate
    device_transform: Callable[[Any], Any] | None = None  # None: the copied batch is used as it is


# ---------------------------------------------------------------------------------------------
# Images


@dataclass(frozen=True)
class ImagePool:
    """``images``: uint8 ``N x 3 x P x P`` in host memory; ``labels``: int64 class ids, one per image;
    ``size``: the side of the crops taken from them."""

    images: torch.Tensor
    labels: torch.Tensor
    size: int

    @property
    def pad(self) -> int:
        """How far a crop can move: ``P - size``."""
        return self.images.shape[-1] - self.size


def padded_size(size: int) -> int:
    """The stored image side for crops of ``size``: 256 for 224, as resize-256-then-crop-224 does."""
    return size + size // 7


def make_image_pool(count: int, size: int, classes: int, seed: int = POOL_SEED) -> ImagePool:
    """``count`` random uint8 images (and labels) from a generator seeded with ``seed``, on the host."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    side = padded_size(size)
    images = torch.randint(0, 256, (count, 3, side, side), dtype=torch.uint8, generator=generator, device="cpu")
    labels = torch.randint(0, classes, (count,), generator=generator, device="cpu")
    return ImagePool(images, labels, size)


def choose_crops(count: int, pad: int) -> torch.Tensor:
    """``count x 3`` int64 ``(top, left, flip)``: offsets in ``[0, pad]``, flip 0 or 1, from torch's generator."""
    offsets = torch.randint(0, pad + 1, (count, 2), device="cpu")
    flips = torch.randint(0, 2, (count, 1), device="cpu")
    return torch.cat([offsets, flips], dim=1)


def crop_flip(images: torch.Tensor, crops: torch.Tensor, size: int) -> torch.Tensor:
    """Each image's ``size x size`` crop at its ``(top, left)``, mirrored where ``flip``, in one gather.

    ``images`` is ``B x C x P x P`` and ``crops`` ``B x 3`` as :func:`choose_crops` makes. Meant for the
    device, where one kernel beats ``B`` small copies; on a CPU :func:`crop_one` per image is faster.
    """
    device = images.device
    crops = crops.to(device)
    steps = torch.arange(size, device=device)
    rows = crops[:, 0:1] + steps  # B x S
    cols = crops[:, 1:2] + steps
    cols = torch.where(crops[:, 2:3].bool(), cols.flip(1), cols)  # a mirror is a reversed column order
    picked = torch.arange(len(images), device=device)
    channels = torch.arange(images.shape[1], device=device)
    # The four indices broadcast to B x C x S x S: image, channel, row, column of each output value.
    return images[
        picked[:, None, None, None], channels[None, :, None, None], rows[:, None, :, None], cols[:, None, None]
    ]


def crop_one(image: torch.Tensor, crop: Sequence[int], size: int) -> torch.Tensor:
    """One ``C x P x P`` image's crop at ``(top, left)``, mirrored where ``flip``: slicing, as torchvision does."""
    top, left, flip = crop
    window = image[:, top : top + size, left : left + size]
    return window.flip(-1) if flip else window


@functools.cache
def _mean_std(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    # Made once per device: building them at each call would copy from the host inside the step.
    mean = torch.tensor(IMAGENET_MEAN, device=device).view(3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device=device).view(3, 1, 1)
    return mean, std


def normalise(images: torch.Tensor) -> torch.Tensor:
    """uint8 ``[..., 3, H, W]`` to float32 ``(x / 255 - mean) / std`` with ImageNet's per-channel values
    (torchvision's ``ToTensor`` then ``Normalize``)."""
    if images.dtype != torch.uint8:
        raise TypeError(f"normalise expects uint8 images, got {images.dtype}")
    out = torch.empty(images.shape, dtype=torch.float32, device=images.device)  # the division converts as it goes
    mean, std = _mean_std(images.device)
    return torch.div(images, 255, out=out).sub_(mean).div_(std)


class HostImages(Dataset[tuple[Any, torch.Tensor]]):
    """Randomly cropped and flipped images from a pool, one sample per ``__getitem__``.

    ``augment="cpu"``: ``(float32 3 x S x S, label)``, normalised here. ``augment="gpu"``:
    ``((uint8 3 x P x P, crop), label)``, for :class:`DeviceAugment` to finish on the device.
    ``length`` is the epoch; index ``i`` reads pool image ``i % N``.
    """

    def __init__(self, pool: ImagePool, augment: str = "cpu", length: int = IMAGENET_TRAIN_IMAGES) -> None:
        check_choice("host images", "augment", augment, AUGMENTS)
        self.pool, self.augment, self.length = pool, augment, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[Any, torch.Tensor]:
        slot = index % len(self.pool.labels)
        crop = choose_crops(1, self.pool.pad)[0]
        label = self.pool.labels[slot]
        if self.augment == "gpu":
            return (self.pool.images[slot], crop), label
        return normalise(crop_one(self.pool.images[slot], crop.tolist(), self.pool.size)), label


class HostImageBatches(HostImages):
    """:class:`HostImages` that fetches a whole batch per call (``__getitems__``).

    ``augment="gpu"``: the uint8 images in one ``index_select``, ``((uint8 B x 3 x P x P, crops),
    labels)``. ``augment="cpu"``: the crops copied into one uint8 batch, then normalised in one op,
    ``(float32 B x 3 x S x S, labels)``. The value is already a batch, so the DataLoader's
    collate_fn must be :func:`whole_batch`.

    From a worker the batch crosses to the main process through shared memory: one copy, which
    ``default_collate`` saves by allocating there with a private torch API. Measured here, about
    3 ms of a 20 ms fetch of 128 uint8 ``3 x 256 x 256`` images: not worth depending on torch internals.
    """

    def __getitems__(self, indices: Sequence[int]) -> tuple[Any, torch.Tensor]:
        pool = self.pool
        slots = torch.as_tensor(indices, dtype=torch.int64, device="cpu") % len(pool.labels)
        crops = choose_crops(len(slots), pool.pad)
        labels = pool.labels.index_select(0, slots)
        if self.augment == "gpu":
            return (pool.images.index_select(0, slots), crops), labels
        cropped = torch.empty((len(slots), 3, pool.size, pool.size), dtype=torch.uint8, device="cpu")
        for row, (slot, crop) in enumerate(zip(slots.tolist(), crops.tolist(), strict=True)):
            cropped[row] = crop_one(pool.images[slot], crop, pool.size)
        return normalise(cropped), labels


def whole_batch(batch: Any) -> Any:
    """The collate_fn for :class:`HostImageBatches`: its ``__getitems__`` already returns a batch."""
    return batch


@dataclass(frozen=True)
class DeviceAugment:
    """The ``device_transform`` of ``augment="gpu"``: ``((uint8 images, crops), labels)`` ->
    ``(float32 B x 3 x size x size, labels)``, cropped, flipped and normalised where the batch is."""

    size: int

    def __call__(self, batch: tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]) -> tuple[torch.Tensor, Any]:
        (images, crops), labels = batch
        return normalise(crop_flip(images, crops, self.size)), labels


def image_pipeline(
    count: int, size: int, classes: int, augment: str = "cpu", fetch: str = "sample", workload: str = "resnet50"
) -> HostPipeline:
    """A pool of ``count`` images for ``size x size`` crops, and the dataset, collate_fn and transform
    that ``augment`` and ``fetch`` ask for; bad values raise :class:`AutotuneError`."""
    check_choice(workload, "augment", augment, AUGMENTS)
    check_choice(workload, "fetch", fetch, FETCHES)
    pool = make_image_pool(count, size, classes)
    dataset_class = HostImageBatches if fetch == "batch" else HostImages
    return HostPipeline(
        dataset=dataset_class(pool, augment),
        collate_fn=whole_batch if fetch == "batch" else None,
        device_transform=DeviceAugment(size) if augment == "gpu" else None,
    )


# ---------------------------------------------------------------------------------------------
# Tokens


def token_stream(count: int, vocab: int, seed: int = POOL_SEED) -> torch.Tensor:
    """``count`` random int32 token ids in ``[0, vocab)`` on the host, from a generator seeded with ``seed``."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(0, vocab, (count,), dtype=torch.int32, generator=generator, device="cpu")


class HostTokens(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Windows of ``seq + 1`` tokens of a host stream: sample ``i`` is ``stream[i : i + seq + 1]`` split
    into inputs (all but the last token) and targets (all but the first)."""

    def __init__(self, stream: torch.Tensor, seq: int) -> None:
        if len(stream) <= seq:
            raise ValueError(f"a stream of {len(stream)} tokens holds no window of {seq + 1}")
        self.stream, self.seq = stream, seq

    def __len__(self) -> int:
        return len(self.stream) - self.seq

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        window = self.stream[index : index + self.seq + 1]
        return window[:-1], window[1:]


def widen_tokens(batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``device_transform`` of host tokens: int32 inputs and targets to int64 on the device."""
    inputs, targets = batch
    return inputs.long(), targets.long()


def token_pipeline(count: int, vocab: int, seq: int) -> HostPipeline:
    """A stream of ``count`` tokens, windows of ``seq`` inputs and targets, widened on the device."""
    return HostPipeline(HostTokens(token_stream(count, vocab), seq), device_transform=widen_tokens)
