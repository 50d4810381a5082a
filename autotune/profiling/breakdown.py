"""A profiler's events -> the time per step by category, the busiest kernels, the step time.

The window is the profiled steps: from the first ``autotune.step`` range's start to the last one's
end, or to the end of the last GPU kernel if that is later (the capture synchronises after the last
step, so every kernel the steps launched has finished by then).

On a GPU the categories are GPU time (kernels and copies, summed per category) and ``gpu_idle`` is
the window minus the union of those intervals. On a CPU they are the ops' self time (a parent op's
own time, without its children, so nothing counts twice), ``other`` takes what no op covers (Python,
the optimizer's loop), and copies between host and device and GPU idle do not apply (``None``).
Either way ``data_wait`` is host time inside ``autotune.data_wait`` ranges; on a CPU the ops inside
them count there and nowhere else.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEvent

from autotune.profiling.kernel_categories import CATEGORIES, DATA_WAIT, GPU_IDLE, KERNEL_CATEGORIES, OTHER, classify

__all__ = ["DATA_WAIT_RANGE", "STEP_RANGE", "TOP_KERNELS", "busy_time", "summarize_events"]

STEP_RANGE = "autotune.step"  # what capture() wraps around each profiled step
DATA_WAIT_RANGE = "autotune.data_wait"  # what the trial job wraps around the input fetch and copy
TOP_KERNELS = 20  # kept in the summary; a table shows fewer
_OUR_RANGES = (STEP_RANGE, DATA_WAIT_RANGE)  # record_function ranges: their GPU shadows are not work


def busy_time(intervals: Iterable[tuple[float, float]]) -> float:
    """The length of the union of ``(start, end)`` intervals: time with at least one of them running."""
    total, reached = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reached:
            total += end - max(start, reached)
            reached = end
    return total


def _ranges_around(event: FunctionEvent) -> set[str]:
    """The names of the ranges and ops that enclose ``event`` on its thread."""
    names, current = set(), event.cpu_parent
    while current is not None:
        names.add(current.name)
        current = current.cpu_parent
    return names


def _in_step(event: FunctionEvent) -> bool:
    """Inside a profiled step and not inside one of its data waits."""
    around = _ranges_around(event)
    return STEP_RANGE in around and DATA_WAIT_RANGE not in around


def _duration(event: FunctionEvent) -> float:
    return event.time_range.end - event.time_range.start


def summarize_events(events: Sequence[FunctionEvent], steps: int, on_gpu: bool) -> dict[str, Any]:
    """The JSON-able summary of ``steps`` profiled steps (times in ms per step; see the module docstring)."""
    host = [e for e in events if e.device_type == DeviceType.CPU]
    device = [e for e in events if _on_device(e)] if on_gpu else []
    start, end = _window(host, device)
    wait_us = sum(_duration(e) for e in host if e.name == DATA_WAIT_RANGE and _in_step(e))
    per_category, per_kernel = _tally(device) if on_gpu else _tally(_step_ops(host), self_time=True)
    idle_us = None
    if on_gpu:
        idle_us = end - start - busy_time((max(e.time_range.start, start), e.time_range.end) for e in device)
    else:
        per_category[OTHER] += max(0.0, end - start - wait_us - sum(per_category.values()))
    return {
        "device": "cuda" if on_gpu else "cpu",
        "steps": steps,
        "step_ms": (end - start) / 1e3 / steps,
        "categories_ms": _categories(per_category, wait_us, idle_us, steps),
        "top": _top(per_kernel, steps),
    }


def _window(host: Sequence[FunctionEvent], device: Sequence[FunctionEvent]) -> tuple[float, float]:
    """Start and end (us) of the profiled steps: the step ranges, and the GPU work they launched."""
    steps = [e for e in host if e.name == STEP_RANGE]
    if not steps:
        raise ValueError(f"no {STEP_RANGE!r} range among {len(host)} host events")
    start = min(e.time_range.start for e in steps)
    return start, max(e.time_range.end for e in [*steps, *device])


def _tally(
    timed: Sequence[FunctionEvent], *, self_time: bool = False
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Microseconds by category, and [microseconds, calls] by name."""
    per_category: dict[str, float] = defaultdict(float)
    per_kernel: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for event in timed:
        spent = event.self_cpu_time_total if self_time else _duration(event)
        per_category[classify(event.name)] += spent
        per_kernel[event.name][0] += spent
        per_kernel[event.name][1] += 1
    return per_category, per_kernel


def _on_device(event: FunctionEvent) -> bool:
    """A kernel, copy or memset on the GPU; not the GPU-side shadow of a ``record_function`` range."""
    # torch 2.13 marks the shadow (is_user_annotation, activity_type); torch 2.11's events have neither
    # attribute set, so our own ranges are also known by name.
    annotation = (
        getattr(event, "is_user_annotation", False)
        or "annotation" in str(getattr(event, "activity_type", None) or "")
        or event.name.startswith(_OUR_RANGES)
    )
    return event.device_type != DeviceType.CPU and not annotation


def _step_ops(host: Sequence[FunctionEvent]) -> list[FunctionEvent]:
    """Host ops run by the steps, outside their data waits (annotations such as the step range are not ops)."""
    return [e for e in host if not e.is_user_annotation and _in_step(e)]


def _categories(per_category: dict[str, float], wait_us: float, idle_us: float | None, steps: int) -> dict[str, Any]:
    on_gpu = idle_us is not None
    out: dict[str, float | None] = {}
    for key in CATEGORIES:
        if key == DATA_WAIT:
            us: float | None = wait_us
        elif key == GPU_IDLE:
            us = max(0.0, idle_us) if idle_us is not None else None
        elif key in ("copy_h2d", "copy_d2h") and not on_gpu:
            us = None  # no device to copy to
        else:
            assert key in KERNEL_CATEGORIES
            us = per_category.get(key, 0.0)
        out[key] = None if us is None else us / 1e3 / steps
    return out


def _top(per_kernel: dict[str, list[float]], steps: int) -> list[dict[str, Any]]:
    ranked = sorted(per_kernel.items(), key=lambda item: -item[1][0])[:TOP_KERNELS]
    return [
        {"name": name, "ms": us / 1e3 / steps, "calls": calls / steps, "category": classify(name)}
        for name, (us, calls) in ranked
    ]
