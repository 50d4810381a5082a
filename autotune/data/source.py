"""Where a trial's step takes its batch from, and how long it waits for it.

``SyntheticBatches`` hands out batches a workload made on the device before timing (no wait).
``LoaderBatches`` takes them from a ``DataLoader`` through the knobs' copy, one epoch after another,
timing each step's wait under the profiler label ``autotune.data_wait``; the workload's
``device_transform`` then runs inside the step, after the wait.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Generator
from typing import Any

import torch
from torch.profiler import record_function
from torch.utils.data import DataLoader

from autotune.data.transfer import batch_tensors, device_batches
from autotune.errors import AutotuneError

__all__ = ["INPUT_WAIT_LABEL", "LoaderBatches", "SyntheticBatches", "wait_metrics"]

INPUT_WAIT_LABEL = "autotune.data_wait"  # what a profile of the step calls the wait


class SyntheticBatches:
    """Batches made on the device before timing, rotated by step index: a step never waits for them."""

    def __init__(self, batches: list[Any]) -> None:
        self.batches = batches

    def first(self) -> Any:
        return self.batches[0]

    def batch(self, index: int) -> Any:
        return self.batches[index % len(self.batches)]


class _HostClock:
    """Wall time on the host: on a CPU the step computes where it waits."""

    def __init__(self) -> None:
        self._started = 0.0
        self._waits: list[float] = []

    def start(self) -> None:
        self._started = time.perf_counter()

    def stop(self) -> None:
        self._waits.append((time.perf_counter() - self._started) * 1e3)

    def waits_ms(self) -> list[float]:
        return list(self._waits)


class _StreamClock:
    """Time on the compute stream (CUDA events), read once the device has caught up.

    The host's own blocked time would count the GPU work queued ahead of a blocking copy (the
    previous step's kernels) as input wait, and call every compute-bound step input-bound.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._started: torch.cuda.Event | None = None
        self._events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    def _record(self) -> torch.cuda.Event:
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.device))
        return event

    def start(self) -> None:
        self._started = self._record()

    def stop(self) -> None:
        assert self._started is not None, "stop() without start()"
        self._events.append((self._started, self._record()))

    def waits_ms(self) -> list[float]:
        torch.cuda.synchronize(self.device)
        return [start.elapsed_time(end) for start, end in self._events]


class LoaderBatches:
    """Batches from ``loader``, copied to ``device`` as the knobs say, epoch after epoch.

    Each :meth:`batch` call is one step's wait: the loader (its workers, or the dataset read in
    this process) and the copy. On a CPU it is the host's blocked time. On CUDA it is the compute
    stream's time from the step's start until its batch is there: the time the GPU idles for
    input, plus a copy that the step cannot overlap; the previous step's kernels that a blocking
    copy waits behind are not counted.
    """

    def __init__(
        self,
        loader: DataLoader[Any],
        device: torch.device,
        *,
        non_blocking: bool = False,
        gpu_prefetch: bool = False,
        transform: Callable[[Any], Any] | None = None,
    ) -> None:
        if len(loader) == 0:
            size = len(loader.dataset)  # type: ignore[arg-type]
            raise AutotuneError(f"batch_size={loader.batch_size} is larger than the dataset ({size} samples)")
        self._host = _epochs(loader)
        self._batches = device_batches(self._host, device, non_blocking=non_blocking, gpu_prefetch=gpu_prefetch)
        self._transform = transform or (lambda batch: batch)
        self._clock = _StreamClock(device) if device.type == "cuda" else _HostClock()
        self._pending: Any = None

    def first(self) -> Any:
        """The first batch, fetched and transformed outside any step; the next :meth:`batch` call returns
        this very batch, so a check made on it (the numerics reference) sees what the first step trains on,
        random augmentation included."""
        if self._pending is None:
            self._pending = self._transform(next(self._batches))
        return self._pending

    def batch(self, index: int) -> Any:
        """The next batch on the device, transformed; getting it (not transforming it) is this step's wait."""
        with record_function(INPUT_WAIT_LABEL):
            self._clock.start()
            pending, self._pending = self._pending, None
            copied = next(self._batches) if pending is None else None
            self._clock.stop()
        return pending if pending is not None else self._transform(copied)

    def waits_ms(self) -> list[float]:
        """Each :meth:`batch` call's wait in ms, in order (synchronises a CUDA device first)."""
        return self._clock.waits_ms()

    def close(self) -> None:
        """Stop reading: the epoch's iterator is dropped (its workers stop), persistent workers go with the loader."""
        self._batches.close()
        self._host.close()


def _epochs(loader: DataLoader[Any]) -> Generator[Any, None, None]:
    """The loader's batches, one epoch after another, without end; the first checked to be host data."""
    checked = False
    while True:
        for batch in loader:
            if not checked:
                _check_host_data(batch)
                checked = True
            yield batch


def _check_host_data(batch: Any) -> None:
    devices = {t.device.type for t in batch_tensors(batch)} - {"cpu"}
    if devices:
        raise AutotuneError(
            f"the dataset returned tensors on {', '.join(sorted(devices))}: a dataset holds host data "
            '(build runs under the trial\'s device: create its tensors with device="cpu")'
        )


def wait_metrics(waits_ms: list[float], step_ms: list[float]) -> dict[str, float]:
    """The timed steps' median wait and the share of their whole time spent waiting for input (0..1)."""
    return {
        "data_wait_ms_p50": statistics.median(waits_ms),
        "data_wait_frac": sum(waits_ms) / sum(step_ms),
    }
