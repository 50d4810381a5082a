"""Host datasets and device transforms of the built-in workloads' ``data: host`` mode, on real loaders."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, default_collate

from autotune.data.transfer import batch_tensors
from autotune.errors import AutotuneError
from autotune.workloads import hostdata
from autotune.workloads.hostdata import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    DeviceAugment,
    HostImageBatches,
    HostImages,
    HostTokens,
    crop_flip,
    crop_one,
    image_pipeline,
    make_image_pool,
    normalise,
    token_pipeline,
    token_stream,
)

SIZE = 32  # the tiny preset's crop; the pool holds 36 x 36 images
POOL = make_image_pool(24, SIZE, classes=10)


def _expected_mean(channel: int) -> float:
    """The mean of uniform uint8 noise after normalisation: (127.5 / 255 - mean) / std."""
    return (0.5 - IMAGENET_MEAN[channel]) / IMAGENET_STD[channel]


def test_padded_size_is_the_resize_then_crop_margin() -> None:
    assert [hostdata.padded_size(s) for s in (224, 112, 32)] == [256, 128, 36]


def test_pool_is_seeded_random_uint8_with_labels() -> None:
    again, other = make_image_pool(24, SIZE, classes=10), make_image_pool(24, SIZE, classes=10, seed=1)
    assert POOL.images.shape == (24, 3, 36, 36) and POOL.images.dtype == torch.uint8
    assert POOL.labels.dtype == torch.int64 and int(POOL.labels.min()) >= 0 and int(POOL.labels.max()) < 10
    assert torch.equal(POOL.images, again.images) and torch.equal(POOL.labels, again.labels)
    assert not torch.equal(POOL.images, other.images)
    assert POOL.images.float().std() > 60  # uniform over 0..255 (std 74), never a constant image
    assert POOL.pad == 4


def test_crop_flip_takes_each_images_own_window_and_mirrors_it() -> None:
    images = torch.arange(2 * 1 * 6 * 6).view(2, 1, 6, 6)  # every value says where it came from
    crops = torch.tensor([[1, 2, 0], [0, 1, 1]])
    out = crop_flip(images, crops, 4)
    assert torch.equal(out[0, 0], images[0, 0, 1:5, 2:6])
    assert torch.equal(out[1, 0], images[1, 0, 0:4, 1:5].flip(-1))
    assert out[1, 0, 0, 0] == images[1, 0, 0, 4]  # mirrored: the first column is the window's last


def test_crop_flip_in_one_gather_matches_slicing_each_image() -> None:
    pad = POOL.pad
    corners = torch.tensor([[0, 0, 0], [pad, pad, 1], [0, pad, 1], [pad, 0, 0]])
    crops = torch.cat([corners, hostdata.choose_crops(len(POOL.images) - 4, pad)])
    expected = torch.stack(
        [crop_one(image, crop.tolist(), SIZE) for image, crop in zip(POOL.images, crops, strict=True)]
    )
    assert torch.equal(crop_flip(POOL.images, crops, SIZE), expected)


def test_normalise_is_torchvisions_to_tensor_then_normalize() -> None:
    images = torch.tensor([0, 128, 255], dtype=torch.uint8).view(3, 1, 1).expand(3, 2, 2)
    out = normalise(images)
    assert out.dtype == torch.float32 and out.shape == (3, 2, 2)
    for channel, value in enumerate((0, 128, 255)):
        expected = (value / 255 - IMAGENET_MEAN[channel]) / IMAGENET_STD[channel]
        assert torch.allclose(out[channel], torch.full((2, 2), expected), atol=1e-6)
    with pytest.raises(TypeError, match="uint8"):
        normalise(out)


@pytest.mark.parametrize("dataset_class", [HostImages, HostImageBatches])
def test_cpu_and_gpu_augment_give_the_same_batch(dataset_class: type[HostImages]) -> None:
    """Same pool, same seed, so the same crop and flip choices: the same normalised tensor whichever side augments."""
    indices = list(range(40))  # past the pool's 24: index i reads image i % 24

    def fetch(augment: str) -> tuple[Any, torch.Tensor]:
        dataset = dataset_class(POOL, augment)
        torch.manual_seed(7)
        if dataset_class is HostImageBatches:
            return dataset.__getitems__(indices)  # type: ignore[attr-defined]
        return default_collate([dataset[i] for i in indices])

    on_host = fetch("cpu")
    shipped = fetch("gpu")
    (raw, crops), labels = shipped
    assert raw.dtype == torch.uint8 and raw.shape == (40, 3, 36, 36)
    assert set(crops[:, 2].tolist()) == {0, 1}  # some flipped, some not: the comparison covers both
    on_device = DeviceAugment(SIZE)(shipped)
    assert on_host[0].shape == on_device[0].shape == (40, 3, SIZE, SIZE)
    assert torch.allclose(on_host[0], on_device[0], rtol=0, atol=1e-6)
    assert torch.equal(on_host[1], labels) and torch.equal(labels, POOL.labels[torch.tensor(indices) % 24])


def test_an_epoch_is_imagenet_long_and_wraps_around_the_pool() -> None:
    dataset = HostImages(POOL, "gpu")
    assert len(dataset) == hostdata.IMAGENET_TRAIN_IMAGES
    (image, _), label = dataset[5]
    (wrapped, _), wrapped_label = dataset[5 + 24]
    assert torch.equal(image, wrapped) and torch.equal(label, wrapped_label)


def test_each_fetch_of_an_image_draws_a_new_crop() -> None:
    dataset = HostImages(POOL, "cpu")
    torch.manual_seed(0)
    views = {tuple(dataset[3][0].flatten()[:64].tolist()) for _ in range(10)}
    assert len(views) > 1  # 50 (top, left, flip) choices: ten equal draws would be a broken sampler


@pytest.mark.parametrize("fetch", ["sample", "batch"])
@pytest.mark.parametrize("augment", ["cpu", "gpu"])
def test_a_dataloader_with_workers_yields_random_normalised_batches(augment: str, fetch: str) -> None:
    pipeline = image_pipeline(24, SIZE, 10, augment, fetch)
    loader = DataLoader(
        pipeline.dataset, batch_size=8, shuffle=True, drop_last=True, num_workers=2, collate_fn=pipeline.collate_fn
    )
    transform = pipeline.device_transform or (lambda batch: batch)
    batches = []
    for step, batch in enumerate(loader):
        batches.append(transform(batch))
        if step == 5:
            break
    for images, labels in batches:
        assert images.dtype == torch.float32 and images.shape == (8, 3, SIZE, SIZE)
        assert labels.dtype == torch.int64 and labels.shape == (8,)
        assert torch.isfinite(images).all()
    assert not torch.equal(batches[0][0], batches[1][0])
    pixels = torch.cat([images for images, _ in batches]).transpose(0, 1).reshape(3, -1)
    for channel in range(3):  # crops of 31,104 noise values a channel: standard error of the mean under 0.01
        assert abs(float(pixels[channel].mean()) - _expected_mean(channel)) < 0.05


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"augment": "tpu"}, "augment='tpu' is not valid: expected one of cpu, gpu"),
     ({"fetch": "all"}, "fetch='all' is not valid: expected one of sample, batch")],
)  # fmt: skip
def test_image_pipeline_refuses_unknown_modes(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(AutotuneError, match=message):
        image_pipeline(4, SIZE, 10, **kwargs)


def test_token_stream_is_seeded_int32_in_the_vocabulary() -> None:
    stream = token_stream(4096, vocab=512)
    assert stream.dtype == torch.int32 and stream.shape == (4096,)
    assert int(stream.min()) >= 0 and int(stream.max()) < 512 and len(stream.unique()) > 400
    assert torch.equal(stream, token_stream(4096, vocab=512))


def test_a_token_sample_is_a_window_split_into_inputs_and_next_tokens() -> None:
    stream = token_stream(100, vocab=512)
    dataset = HostTokens(stream, seq=8)
    assert len(dataset) == 92  # every start whose window of 9 fits
    inputs, targets = dataset[91]
    assert torch.equal(inputs, stream[91:99]) and torch.equal(targets, stream[92:100])
    with pytest.raises(ValueError, match="no window"):
        HostTokens(stream, seq=100)


def test_token_batches_from_workers_are_int64_next_token_pairs_on_the_device() -> None:
    pipeline = token_pipeline(4096, vocab=512, seq=16)
    assert pipeline.collate_fn is None
    loader = DataLoader(pipeline.dataset, batch_size=4, shuffle=True, drop_last=True, num_workers=2)
    assert pipeline.device_transform is not None
    inputs, targets = pipeline.device_transform(next(iter(loader)))
    assert inputs.dtype == targets.dtype == torch.int64 and inputs.shape == targets.shape == (4, 16)
    assert torch.equal(inputs[:, 1:], targets[:, :-1])


@pytest.mark.parametrize("augment", ["cpu", "gpu"])
def test_host_data_stays_on_the_host_whatever_the_default_device(augment: str) -> None:
    """The trial builds workloads under ``with torch.device(device)``: no host tensor may follow it there."""
    with torch.device("meta"):
        images = image_pipeline(24, SIZE, 10, augment, "batch")
        tokens = token_pipeline(256, vocab=512, seq=16)
        fetched = [images.dataset[0], images.dataset.__getitems__([0, 1, 2]), tokens.dataset[0]]  # type: ignore[attr-defined]
    tensors = list(batch_tensors(fetched))
    assert len(tensors) == (8 if augment == "gpu" else 6)  # the crop choices too
    assert {t.device.type for t in tensors} == {"cpu"}
