"""Batches copied to the device: plain copies (``non_blocking`` as the knob says), or the next batch
copied on a side CUDA stream while the current step computes (``gpu_prefetch``)."""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator, Mapping
from typing import Any

import torch

__all__ = ["batch_tensors", "device_batches", "to_device"]


def to_device(batch: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """``batch`` with every tensor in it (in tuples, lists, dicts, namedtuples) moved to ``device``.

    Anything else (ints, strings) is left as it is.
    """
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, Mapping):
        mapping: Any = type(batch)  # a dict, an OrderedDict, a user's Mapping: rebuilt as the same type
        return mapping({key: to_device(value, device, non_blocking) for key, value in batch.items()})
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple: rebuilt field by field
        return type(batch)(*(to_device(value, device, non_blocking) for value in batch))
    if isinstance(batch, tuple | list):
        return type(batch)(to_device(value, device, non_blocking) for value in batch)
    return batch


def batch_tensors(batch: Any) -> Iterator[torch.Tensor]:
    """Every tensor in ``batch``, however nested in tuples, lists and dicts."""
    if isinstance(batch, torch.Tensor):
        yield batch
    elif isinstance(batch, Mapping):
        for value in batch.values():
            yield from batch_tensors(value)
    elif isinstance(batch, tuple | list):
        for value in batch:
            yield from batch_tensors(value)


def device_batches(
    host_batches: Iterable[Any], device: torch.device, *, non_blocking: bool = False, gpu_prefetch: bool = False
) -> Generator[Any, None, None]:
    """The batches of ``host_batches`` on ``device``, copied as the knobs say: what the trials measured.

    With ``gpu_prefetch`` on a CUDA device, the copy of batch i+1 is queued on a side stream when
    batch i is handed out, so it runs while step i computes; elsewhere ``gpu_prefetch`` does nothing.
    Production code can feed its loop from it::

        for images, labels in device_batches(loader, device, non_blocking=True, gpu_prefetch=True): ...
    """
    if gpu_prefetch and device.type == "cuda":
        yield from _prefetched(iter(host_batches), device, non_blocking)
        return
    for batch in host_batches:
        yield to_device(batch, device, non_blocking)


_END = object()


def _prefetched(host: Iterator[Any], device: torch.device, non_blocking: bool) -> Iterator[Any]:
    side = torch.cuda.Stream(device)

    def stage() -> Any:
        batch = next(host, _END)
        if batch is _END:
            return _END
        with torch.cuda.stream(side):
            return to_device(batch, device, non_blocking)

    staged = stage()
    while staged is not _END:
        compute = torch.cuda.current_stream(device)
        compute.wait_stream(side)  # this batch's copy only: the next one is queued after the wait
        for tensor in batch_tensors(staged):
            # Allocated on the side stream, used on the compute stream: keep the memory until that use is done.
            tensor.record_stream(compute)
        current, staged = staged, stage()
        yield current
