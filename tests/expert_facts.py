"""Device facts and a measured default trial for the informed start's tests (tests/sweep/test_expert_choice.py,
test_informed_start.py): its choice is a function of them, no process runs."""

from __future__ import annotations

from typing import Any

from study_records import measured_default

from autotune.measurement import Status
from autotune.records import TrialRecord
from autotune.space import Space
from autotune.sweep.proposals.expert_choice import DeviceFacts

H100 = DeviceFacts("cuda", "NVIDIA H100 80GB HBM3", 79.1, bf16=True, four_d_weights=True, cpus=16)
V100 = DeviceFacts("cuda", "Tesla V100-SXM2-32GB", 31.7, bf16=False, four_d_weights=True, cpus=8)
CPU = DeviceFacts("cpu", "CPU", 23.5, bf16=False, four_d_weights=True, cpus=2)


def default_trial(space: Space, peak_gib: float | None, status: Status = Status.OK) -> TrialRecord:
    """The space's default configuration, measured (ok, or as ``status``) at ``peak_gib`` of peak memory."""
    metrics: dict[str, Any] = {"throughput": 100.0}
    if peak_gib is not None:
        metrics["peak_mem_gib"] = peak_gib
    return measured_default(space.default_params(), metrics, status=status)
