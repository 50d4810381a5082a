"""Run a few training steps under torch.profiler and summarise where their time went.

The trial job calls :func:`capture_into` after its timed window, so compilation, cuDNN autotuning and
allocator growth are over and the profile shows the steady step that was measured.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from autotune.atomicfile import replaced_atomically
from autotune.errors import first_line
from autotune.measurement import TrialResult
from autotune.profiling.breakdown import STEP_RANGE, summarize_events

__all__ = ["capture", "capture_into"]


def capture(
    step: Callable[[int], object],
    steps: int,
    device: torch.device | str,
    trace_path: str | Path | None = None,
) -> dict[str, Any]:
    """Profile ``step(0) .. step(steps - 1)`` and return a JSON-able summary.

    ``step(i)`` runs one whole training step, data wait included. CPU activity is always recorded,
    CUDA activity on a CUDA device. With ``trace_path`` the Chrome trace (open it in Perfetto or
    chrome://tracing) is written there. The summary holds ``device``, ``steps``, ``step_ms`` (the
    profiled wall time per step, profiler overhead included), ``categories_ms`` (ms per step by
    category; ``None`` where one does not apply), ``top`` (the busiest kernels, or ops on a CPU, with
    ms and calls per step) and ``trace`` (the path written, or ``None``).
    """
    if steps < 1:
        raise ValueError(f"capture needs at least one step, got {steps=}")
    device = torch.device(device)
    on_gpu = device.type == "cuda"
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if on_gpu else [])]
    with profile(activities=activities) as prof:
        _synchronize(device)  # nothing launched before the window runs inside it
        for i in range(steps):
            with record_function(STEP_RANGE):
                step(i)
        _synchronize(device)
    summary = summarize_events(prof.events(), steps, on_gpu)
    if trace_path is not None:
        with replaced_atomically(Path(trace_path)) as temporary:  # a full disk leaves no half a trace
            prof.export_chrome_trace(str(temporary))
    summary["trace"] = None if trace_path is None else str(trace_path)
    return summary


def capture_into(
    result: TrialResult, step: Callable[[int], object], steps: int, device: torch.device, folder: str | None
) -> None:
    """Profile ``steps`` more whole steps (data wait included) into ``result.extra["profile"]``, the Chrome trace in
    ``<folder>/trace.json`` when ``folder`` is given.

    The measurement is already made: a profile that cannot be captured is a warning on the result,
    not a failed trial.
    """
    trace_path = str(Path(folder) / "trace.json") if folder else None
    try:
        result.extra["profile"] = capture(step, steps, device, trace_path)
    except Exception as exc:
        result.warnings.append(f"profile not captured: {type(exc).__name__}: {first_line(exc)}")


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
