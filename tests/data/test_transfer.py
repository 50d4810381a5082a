"""Batches copied to the device: nested structures, plain copies, and the side-stream prefetch on a GPU."""

from __future__ import annotations

from collections import namedtuple

import pytest
import torch

from autotune.data import batch_tensors, device_batches, to_device

Pair = namedtuple("Pair", ["inputs", "targets"])


def test_every_tensor_of_a_nested_batch_is_moved_and_the_rest_kept() -> None:
    batch = {"pixels": torch.ones(2, 3), "meta": [torch.zeros(2), "name", 7], "pair": Pair(torch.ones(1), 3)}
    moved = to_device(batch, torch.device("meta"))
    assert moved["pixels"].device.type == "meta" and moved["meta"][0].device.type == "meta"
    assert moved["meta"][1:] == ["name", 7]
    assert isinstance(moved["pair"], Pair) and moved["pair"].inputs.device.type == "meta" and moved["pair"].targets == 3
    assert len(list(batch_tensors(moved))) == 3


def test_device_batches_copies_each_batch_once_in_order() -> None:
    host = [(torch.ones(i + 1), torch.tensor([i])) for i in range(3)]
    copied = list(device_batches(host, torch.device("meta"), non_blocking=True, gpu_prefetch=True))
    assert [inputs.shape[0] for inputs, _ in copied] == [1, 2, 3]  # gpu_prefetch does nothing off a GPU
    assert all(inputs.device.type == "meta" for inputs, _ in copied)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("non_blocking", [False, True])
def test_prefetched_batches_arrive_whole_and_in_order(non_blocking: bool) -> None:
    host = [torch.full((1024, 1024), float(i)).pin_memory() for i in range(6)]
    device = torch.device("cuda")
    for i, batch in enumerate(device_batches(host, device, non_blocking=non_blocking, gpu_prefetch=True)):
        torch.cuda._sleep(1_000_000)  # a long step on the compute stream while the next copy runs beside it
        assert batch.device.type == "cuda" and bool((batch == i).all())
