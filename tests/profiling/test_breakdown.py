"""The union of GPU busy intervals, and the summary of a real profile's events."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from autotune.profiling.breakdown import DATA_WAIT_RANGE, STEP_RANGE, busy_time, summarize_events


@pytest.mark.parametrize(
    ("intervals", "busy"),
    [
        ([], 0.0),
        ([(0.0, 2.0)], 2.0),
        ([(0.0, 2.0), (5.0, 6.0)], 3.0),  # a gap: idle in between
        ([(0.0, 4.0), (1.0, 2.0)], 4.0),  # nested: a copy under a kernel on another stream
        ([(3.0, 6.0), (0.0, 4.0)], 6.0),  # overlapping, out of order
        ([(0.0, 1.0), (1.0, 2.0)], 2.0),  # back to back
    ],
)
def test_busy_time_is_the_length_of_the_union(intervals: list[tuple[float, float]], busy: float) -> None:
    assert busy_time(intervals) == pytest.approx(busy)


def test_events_outside_the_steps_and_inside_data_waits_count_only_where_they_belong() -> None:
    weight = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.mm(weight, weight)  # before the steps: not part of any
        for _ in range(2):
            with record_function(STEP_RANGE):
                with record_function(DATA_WAIT_RANGE):
                    batch = torch.randn(64, 64).mm(weight)  # the loader's work: data wait, not matmul
                torch.relu(batch)
    summary = summarize_events(prof.events(), 2, on_gpu=False)
    names = {kernel["name"] for kernel in summary["top"]}
    assert "aten::relu" in names or "aten::clamp_min" in names
    assert not names & {"aten::mm", "aten::randn", "aten::normal_"}
    categories = summary["categories_ms"]
    assert categories["matmul_conv"] == 0.0
    assert categories["data_wait"] > 0
    assert categories["gpu_idle"] is None and categories["copy_h2d"] is None
    assert sum(v for v in categories.values() if v is not None) == pytest.approx(summary["step_ms"])


def test_events_without_a_step_range_are_refused() -> None:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.randn(8).sum()
    with pytest.raises(ValueError, match=STEP_RANGE):
        summarize_events(prof.events(), 1, on_gpu=False)
