"""Where a trial's step takes its batch from, and the wait it times."""

from __future__ import annotations

import pytest
import torch
from data_workloads import Points
from torch.utils.data import DataLoader

from autotune.data import LoaderBatches, SyntheticBatches, wait_metrics
from autotune.errors import AutotuneError

CPU = torch.device("cpu")


def test_synthetic_batches_rotate_by_step_index() -> None:
    source = SyntheticBatches(["a", "b", "c"])
    assert source.first() == "a" and [source.batch(i) for i in range(4)] == ["a", "b", "c", "a"]


def test_loader_batches_run_epoch_after_epoch() -> None:
    source = LoaderBatches(DataLoader(Points(24), batch_size=8, drop_last=True), CPU)
    seen = [source.batch(i)[1] for i in range(7)]  # 3 batches an epoch: the third epoch is under way
    assert torch.equal(torch.cat(seen[:3]), Points(24).targets) and torch.equal(seen[3], seen[0])
    assert len(source.waits_ms()) == 7
    source.close()


def test_a_slow_dataset_is_a_long_wait() -> None:
    source = LoaderBatches(DataLoader(Points(64, delay_s=0.002), batch_size=8), CPU)
    for index in range(3):
        source.batch(index)
    assert all(wait >= 8 * 2.0 for wait in source.waits_ms())  # 8 samples of 2 ms each, read in this process
    source.close()


def test_the_first_batch_is_the_first_steps_batch_transformed_once() -> None:
    calls = []

    def augment(batch: list[torch.Tensor]) -> list[torch.Tensor]:
        calls.append(1)
        return [batch[0] + torch.randn_like(batch[0]), batch[1]]  # random: a second call would differ

    source = LoaderBatches(DataLoader(Points(32), batch_size=8), CPU, transform=augment)
    first = source.first()
    assert source.first() is first and source.batch(0) is first and len(calls) == 1
    assert not torch.equal(source.batch(1)[0], first[0]) and len(calls) == 2
    assert len(source.waits_ms()) == 2  # first() was outside any step: no wait recorded for it
    source.close()


def test_a_batch_larger_than_the_dataset_is_bad_input() -> None:
    with pytest.raises(AutotuneError, match=r"batch_size=64 is larger than the dataset \(20 samples\)"):
        LoaderBatches(DataLoader(Points(20), batch_size=64, drop_last=True), CPU)


def test_wait_metrics_are_the_median_and_the_share_of_step_time() -> None:
    metrics = wait_metrics([1.0, 3.0, 2.0], [10.0, 10.0, 10.0])
    assert metrics == {"data_wait_ms_p50": 2.0, "data_wait_frac": pytest.approx(0.2)}
