"""What one trial measured: :class:`TrialResult` (whatever happened to it: its status, reason, metrics, env) and the
metric names several stages share. The trial job returns it; the study records it (:mod:`autotune.records`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "AHEAD_METRIC",
    "AHEAD_WAIT_METRIC",
    "AUTOTUNE_COMPILE_METRIC",
    "AUTOTUNE_METRIC",
    "COMPILE_PHASE_METRICS",
    "INPUT_BOUND_WAIT_FRAC",
    "MFU_METRIC",
    "MODEL_FLOPS_METRIC",
    "TFLOPS_METRIC",
    "Status",
    "TrialResult",
]

# A trial that spends more than this share of its step time waiting for input is input-bound: its
# throughput says more about the data path than about the model's knobs.
INPUT_BOUND_WAIT_FRAC = 0.1

# A compiled trial's compile by the compiler's own clocks (autotune.trial.compilephases says what each is): the
# compiler's wall time, the part in Inductor, and within the compile the wait for kernel builds, in seconds.
COMPILE_PHASE_METRICS = ("compile_wall_s", "compile_inductor_s", "compile_kernel_wait_s")
# A trial whose graph the sweep compiled ahead of it, on the CPU while other trials were measured
# (autotune.sweep.proposals.compile_ahead): how long that compile took, and how long the trial waited for it to end
# (part of its compile_s: the GPU sat idle meanwhile).
AHEAD_METRIC = "compiled_ahead_s"
AHEAD_WAIT_METRIC = "compile_ahead_wait_s"
# A trial whose unpinned triton.autotune kernels benchmarked their configs (autotune.kernels.autotuning): the
# seconds of those rounds, compiles and benchmarks (nearly always in its first steps: one-off work, so part of its
# compile_s), and of the configs' compiles in them, done in parallel before the benchmarks.
AUTOTUNE_METRIC = "kernel_autotune_s"
AUTOTUNE_COMPILE_METRIC = "kernel_autotune_compile_s"

# How far a training step is from the GPU's limit (autotune.trial.flops): its model FLOPs (forward and backward), the
# TFLOP/s it achieved (a kernel workload reports its own under the same name), and MFU, those over the GPU's dense
# peak for the precision it ran in (a fraction; absent on a CPU or a GPU without a known peak).
MODEL_FLOPS_METRIC = "model_flops_per_step"
TFLOPS_METRIC = "tflops"
MFU_METRIC = "mfu"


class Status(StrEnum):
    """How a trial ended. Only ``ok`` carries trustworthy metrics."""

    OK = "ok"
    OOM = "oom"
    TIMEOUT = "timeout"
    CRASH = "crash"
    COMPILE_ERROR = "compile_error"
    NUMERICS = "numerics"
    INVALID = "invalid"
    PRUNED = "pruned"  # stopped after warm-up: already far slower than the sweep's best


@dataclass
class TrialResult:
    """The outcome of one trial (the JSON contract of ``autotune trial --json``).

    ``metrics`` holds floats plus a few strings (``throughput_unit``, ``noop_knobs``); ``env`` is
    the fingerprint of the machine and software that produced the numbers.
    """

    status: Status
    reason: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    # Per-step series (e.g. ``step_ms``): logged as artifacts, never as hundreds of metrics.
    series: dict[str, list[float]] = field(default_factory=dict)
    # Listed Triton kernels: import path -> the config pinned, its launches and shape keys.
    kernels: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Things a person should know about an ok trial (its compile artifacts not saved, ...).
    warnings: list[str] = field(default_factory=list)
    # JSON-able extras a caller asked for (``profile``: what autotune.profiling.capture returned).
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def input_bound(self) -> bool:
        """An ok trial whose steps waited for input more than :data:`INPUT_BOUND_WAIT_FRAC` of their time."""
        wait = self.metrics.get("data_wait_frac")
        return self.ok and isinstance(wait, int | float) and wait > INPUT_BOUND_WAIT_FRAC

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["status"] = self.status.value
        return out

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        return cls(
            status=Status(data["status"]),
            reason=data.get("reason"),
            params=dict(data.get("params") or {}),
            metrics=dict(data.get("metrics") or {}),
            env=dict(data.get("env") or {}),
            series={k: list(v) for k, v in (data.get("series") or {}).items()},
            kernels={k: dict(v) for k, v in (data.get("kernels") or {}).items()},
            warnings=list(data.get("warnings") or []),
            extra=dict(data.get("extra") or {}),
        )

    @classmethod
    def failed(cls, status: Status, reason: str, params: dict[str, Any] | None = None) -> TrialResult:
        """A failed trial; ``reason`` is cut to one line so tags and tables stay readable."""
        one_line = " ".join(str(reason).split())
        return cls(status=status, reason=one_line[:300], params=dict(params or {}))
