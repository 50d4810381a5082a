"""Timing and telemetry: synchronised step timers, statistics, peak memory, NVML power and energy."""

from __future__ import annotations

import contextlib
import math
import os
import resource
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from autotune.host import process_name
from autotune.trial.fingerprint import nvml_handle, open_nvml

__all__ = [
    "GpuTelemetry",
    "hand_back_memory",
    "peak_memory_gib",
    "settled",
    "summarize",
    "time_steps",
]


def _percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values (q in [0, 1])."""
    pos = (len(sorted_values) - 1) * q
    low, high = math.floor(pos), math.ceil(pos)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


def summarize(step_ms: list[float]) -> dict[str, float]:
    """Median, p90, mean and coefficient of variation of step times in milliseconds."""
    ordered = sorted(step_ms)
    mean = statistics.fmean(ordered)
    std = statistics.pstdev(ordered) if len(ordered) > 1 else 0.0
    return {
        "step_ms_p50": _percentile(ordered, 0.5),
        "step_ms_p90": _percentile(ordered, 0.9),
        "step_ms_mean": mean,
        "step_cv": std / mean if mean > 0 else 0.0,
    }


def settled(step_ms: list[float], window: int, tolerance: float) -> bool:
    """True when the last ``window`` steps all lie within ``tolerance`` of their median."""
    if len(step_ms) < window:
        return False
    recent = step_ms[-window:]
    median = statistics.median(recent)
    return all(abs(t - median) <= tolerance * median for t in recent)


def time_steps(step: Callable[[int], None], count: int, device: torch.device) -> list[float]:
    """Run ``step(i)`` ``count`` times and return each step's time in ms.

    On CUDA the steps are queued back to back with an event pair around each, and the host
    waits once at the end, so timing adds no synchronisation between steps. On CPU each step
    is synchronous and timed with ``perf_counter``.
    """
    if device.type != "cuda":
        times = []
        for i in range(count):
            start = time.perf_counter()
            step(i)
            times.append((time.perf_counter() - start) * 1e3)
        return times
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(count)]
    for i, (start_event, end_event) in enumerate(events):
        start_event.record()
        step(i)
        end_event.record()
    torch.cuda.synchronize(device)
    return [start_event.elapsed_time(end_event) for start_event, end_event in events]


def peak_memory_gib(device: torch.device) -> float:
    """Allocator peak on a GPU; peak resident set size of this process on a CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # ru_maxrss is in KiB on Linux


def hand_back_memory(device: torch.device) -> None:
    """Give the caching allocator's free memory back and start the peak statistics afresh, so what ran before (the
    eager probe) counts in neither."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


_PROCESS_POLL_TICKS = 20  # per-process samples are read every second: NVML's buffer holds only a few


@dataclass
class GpuTelemetry:
    """Samples NVML power, utilisation and SM clock on a thread while timed steps run.

    Energy comes from the GPU's total-energy counter when it answers (exact), else from the
    mean of the power samples times the elapsed time. ``gpu_other_processes`` counts the other
    processes that computed on this GPU during the window, from NVML's per-process utilisation
    samples; a process that only holds a context (a notebook, the parent of a test) is not one.
    Where NVML keeps no per-process samples, every other process holding a context counts.
    :attr:`others` names them.
    """

    device: torch.device
    interval_s: float = 0.05
    metrics: dict[str, float] = field(default_factory=dict)
    _samples: list[tuple[float, float, float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _busy_others: set[int] | None = field(default_factory=set)  # None: NVML cannot tell
    _since_us: int = 0
    _names: dict[int, str] = field(default_factory=dict)  # each other process, named when first seen
    others: str | None = None  # the other processes seen computing in the window: "pid 123 (autotune-ahead), ..."

    @contextlib.contextmanager
    def window(self) -> Iterator[None]:
        nvml = open_nvml() if self.device.type == "cuda" else None
        if nvml is None:
            yield
            return
        handle = nvml_handle(nvml, self.device)
        holders = _other_gpu_processes(nvml, handle)
        for pid in holders:
            self._name(pid)
        energy_start = self._energy_mj(nvml, handle)
        self._since_us = int(time.time() * 1e6)
        thread = threading.Thread(target=self._sample, args=(nvml, handle), daemon=True)
        start = time.perf_counter()
        thread.start()
        try:
            yield
        finally:
            torch.cuda.synchronize(self.device)
            elapsed = time.perf_counter() - start
            self._stop.set()
            thread.join()
            energy_end = self._energy_mj(nvml, handle)
            self._finish(elapsed, energy_start, energy_end)
            # Anything else computing on this GPU while we time makes the numbers meaningless (seen:
            # two sweeps on one H200, a default trial measured 37% slow). Recorded, for the sweep to flag.
            self._poll_processes(nvml, handle)
            others = self._busy_others
            if others is None:
                others = holders | _other_gpu_processes(nvml, handle)
            self.others = ", ".join(self._name(pid) for pid in sorted(others)) or None
            self.metrics["gpu_other_processes"] = float(len(others))

    def _name(self, pid: int) -> str:
        """``pid``'s name as first read (a short-lived process may be gone, its pid reused, by the window's end)."""
        if pid not in self._names:
            self._names[pid] = process_name(pid)
        return self._names[pid]

    def _poll_processes(self, nvml: Any, handle: Any) -> None:
        """Add the other processes with SM activity since the last poll (NVML keeps a few seconds)."""
        if self._busy_others is None:
            return
        polled = _busy_processes(nvml, handle, self._since_us)
        if polled is None:
            self._busy_others = None
            return
        pids, self._since_us = polled
        others = pids - {os.getpid()}
        self._busy_others |= others
        for pid in others:
            self._name(pid)  # named while it computes

    @staticmethod
    def _energy_mj(nvml: Any, handle: Any) -> float | None:
        try:
            return float(nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        except Exception:
            return None

    def _sample(self, nvml: Any, handle: Any) -> None:
        ticks, reads_power = 0, True
        while not self._stop.wait(self.interval_s):
            ticks += 1
            if ticks % _PROCESS_POLL_TICKS == 0:
                self._poll_processes(nvml, handle)
            if reads_power:
                reads_power = self._read_power(nvml, handle)

    def _read_power(self, nvml: Any, handle: Any) -> bool:
        """Append a power/utilisation/clock sample; False when this GPU does not report them."""
        try:
            power_w = nvml.nvmlDeviceGetPowerUsage(handle) / 1e3
            util = nvml.nvmlDeviceGetUtilizationRates(handle).gpu
            clock = nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)
        except Exception:
            return False
        self._samples.append((power_w, float(util), float(clock)))
        return True

    def _finish(self, elapsed: float, energy_start: float | None, energy_end: float | None) -> None:
        self.metrics["window_s"] = elapsed
        if self._samples:
            powers, utils, clocks = zip(*self._samples, strict=True)
            self.metrics["power_w_mean"] = statistics.fmean(powers)
            self.metrics["gpu_util_mean"] = statistics.fmean(utils)
            self.metrics["sm_clock_mhz_mean"] = statistics.fmean(clocks)
        if energy_start is not None and energy_end is not None and energy_end > energy_start:
            self.metrics["energy_j"] = (energy_end - energy_start) / 1e3
            self.metrics["power_w_mean"] = self.metrics["energy_j"] / elapsed
        elif "power_w_mean" in self.metrics:
            self.metrics["energy_j"] = self.metrics["power_w_mean"] * elapsed


def _busy_processes(nvml: Any, handle: Any, since_us: int) -> tuple[set[int], int] | None:
    """PIDs with SM activity in NVML's per-process samples newer than ``since_us`` (microseconds
    since the epoch), and the newest sample's time; ``None`` when this GPU or driver keeps none.

    NOT_FOUND means no process computed since then. Other errors, such as a sample arriving
    between pynvml's two calls (INSUFFICIENT_SIZE), read as no news: the next poll sees it.
    """
    unsupported = (nvml.NVML_ERROR_NOT_SUPPORTED, nvml.NVML_ERROR_FUNCTION_NOT_FOUND, nvml.NVML_ERROR_NO_PERMISSION)
    try:
        samples = nvml.nvmlDeviceGetProcessUtilization(handle, since_us)
    except nvml.NVMLError as exc:
        return None if getattr(exc, "value", None) in unsupported else (set(), since_us)
    except Exception:  # a binding without the call
        return None
    pids = {sample.pid for sample in samples if sample.smUtil > 0}
    return pids, max((int(sample.timeStamp) for sample in samples), default=since_us)


def _other_gpu_processes(nvml: Any, handle: Any) -> set[int]:
    """PIDs of other processes computing on this GPU (empty when NVML cannot tell)."""
    try:
        running = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except Exception:
        return set()
    return {p.pid for p in running if p.pid != os.getpid()}
