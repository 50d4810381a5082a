"""The DataLoader the data knobs describe, and which of them are no-ops where they cannot apply."""

from __future__ import annotations

import pytest
import torch
from data_workloads import Points

from autotune.data import build_loader, data_noops
from autotune.knobs import Knobs

TUNED = Knobs(num_workers=2, pin_memory=True, prefetch_factor=4, persistent_workers=True)


def test_the_knobs_become_the_loaders_settings() -> None:
    loader = build_loader(Points(64), 8, TUNED, "cuda")
    assert (loader.batch_size, loader.num_workers, loader.prefetch_factor) == (8, 2, 4)
    assert loader.pin_memory and loader.persistent_workers and loader.drop_last


def test_pytorch_defaults_give_pytorchs_loader() -> None:
    loader = build_loader(Points(64), 8, Knobs(), "cuda")
    assert (loader.num_workers, loader.pin_memory, loader.prefetch_factor, loader.persistent_workers) == (
        0,
        False,
        None,
        False,
    )


def test_batches_are_shuffled_and_full() -> None:
    points = Points(20)
    batches = list(build_loader(points, 8, Knobs(), "cpu"))
    assert [len(targets) for _, targets in batches] == [8, 8]  # the last 4 samples dropped
    whole = build_loader(points, 20, Knobs(), "cpu")
    assert not torch.equal(next(iter(whole))[0], points.inputs)  # same order: 1 chance in 20!


def test_pinning_is_for_copies_to_a_gpu() -> None:
    assert build_loader(Points(64), 8, TUNED, "cuda").pin_memory
    assert not build_loader(Points(64), 8, TUNED, "cpu").pin_memory


def test_worker_only_settings_are_left_out_without_workers() -> None:
    loader = build_loader(Points(64), 8, Knobs(prefetch_factor=4, persistent_workers=True), "cpu")
    assert (loader.prefetch_factor, loader.persistent_workers) == (None, False)


def test_overrides_win_and_dropping_the_workers_drops_their_settings() -> None:
    loader = build_loader(Points(64), 8, TUNED, "cpu", num_workers=0, shuffle=False)
    assert (loader.num_workers, loader.prefetch_factor, loader.persistent_workers) == (0, None, False)
    assert [t.item() for t in next(iter(loader))[1]] == Points(64).targets[:8].tolist()  # not shuffled


@pytest.mark.parametrize(
    ("knobs", "device_type", "has_dataset", "noops"),
    [
        (TUNED, "cuda", True, []),
        (TUNED, "cpu", True, ["pin_memory"]),
        (Knobs(non_blocking=True, gpu_prefetch=True), "cpu", True, ["non_blocking", "gpu_prefetch"]),
        (Knobs(prefetch_factor=2, persistent_workers=True), "cuda", True, ["prefetch_factor", "persistent_workers"]),
        (TUNED, "cuda", False, ["num_workers", "pin_memory", "prefetch_factor", "persistent_workers"]),
        (Knobs(), "cpu", False, []),  # PyTorch's defaults are never no-ops: nothing was asked for
    ],
)
def test_data_knobs_that_cannot_apply_are_noops(
    knobs: Knobs, device_type: str, has_dataset: bool, noops: list[str]
) -> None:
    assert data_noops(knobs, device_type, has_dataset=has_dataset) == noops
