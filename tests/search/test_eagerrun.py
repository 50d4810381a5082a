"""An eager full-precision trial's run from the default's steps (autotune.search.eagerrun), on figures an H100 measured
(BENCHMARKS.md): the default trials of GPT-2 and ResNet-50 sweeps, and the eager fp32 trial each sweep's sampler
drew first at 4x the default's batch."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pytest
from study_records import measured_default

from autotune.measurement import Status
from autotune.records import TrialRecord
from autotune.search.costmodel import Seconds
from autotune.search.eagerrun import eager_run_s, floored

# (default params, its duration, its step figures, the 4x-batch fp32 eager trial's params, that trial's duration)
GPT2 = (
    {"batch_size": 16, "precision": "default", "compile_mode": "none", "head": "torch"},
    20.222,
    {"step_ms_p50": 305.845, "warmup_steps": 6, "first_step_s": 0.4318, "window_s": 9.2109},
    {"batch_size": 64, "precision": "fp32", "compile_mode": "none", "head": "fused", "fused_optimizer": True},
    58.6,
)
RESNET50 = (
    {"batch_size": 128, "precision": "default", "memory_format": "contiguous", "compile_mode": "none"},
    17.292,
    {"step_ms_p50": 71.590, "warmup_steps": 6, "first_step_s": 0.5350, "window_s": 3.0087},
    {"batch_size": 512, "precision": "fp32", "memory_format": "channels_last", "compile_mode": "none"},
    24.3,
)


def default_record(
    params: dict[str, Any], duration_s: float, metrics: dict[str, Any], device: str = "cuda"
) -> TrialRecord:
    return measured_default(params, {"throughput": 1.0, **metrics}, env={"device": device}, duration_s=duration_s)


@pytest.mark.parametrize("case", [GPT2, RESNET50], ids=["gpt2", "resnet50"])
def test_the_eager_fp32_trial_at_four_times_the_batch_is_predicted_near_its_run(case: tuple[Any, ...]) -> None:
    default_params, duration_s, metrics, eager, measured_s = case
    default = default_record(default_params, duration_s, metrics)
    assert eager_run_s(default, default_params) == pytest.approx(duration_s, rel=0.05)  # its own run, back
    predicted = eager_run_s(default, eager)
    assert predicted is not None and predicted == pytest.approx(measured_s, rel=0.12)
    # the cost model priced it at the default's run with only the default measured: 2.9x and 1.4x short
    assert predicted > 1.3 * duration_s


def test_smaller_batches_run_shorter_and_the_timed_steps_follow_the_measuring_rule() -> None:
    default_params, duration_s, metrics, eager, _ = GPT2
    default = default_record(default_params, duration_s, metrics)
    runs = [eager_run_s(default, {**eager, "batch_size": batch}) for batch in (8, 16, 32, 64)]
    assert all(r is not None for r in runs) and runs == sorted(cast("list[float]", runs))  # no None: checked first
    # at least 30 timed steps on a GPU (MeasureSettings), 10 on a CPU: the same default predicts less there
    on_cpu = eager_run_s(default_record(default_params, duration_s, metrics, device="cpu"), eager)
    assert on_cpu is not None and runs[-1] is not None and on_cpu < runs[-1]


@pytest.mark.parametrize(
    "change",
    [
        {"compile_mode": "default"},
        {"precision": "bf16"},
        {"precision": "fp16"},
        {"precision": "tf32"},
        {"precision": "default", "matmul_precision": "high"},  # TF32 matmuls
    ],
    ids=["compiled", "bf16", "fp16", "tf32", "tf32-matmuls"],
)
def test_compiled_or_lower_precision_configurations_are_not_predicted(change: dict[str, Any]) -> None:
    default_params, duration_s, metrics, eager, _ = GPT2
    assert eager_run_s(default_record(default_params, duration_s, metrics), {**eager, **change}) is None


def test_a_default_without_step_figures_or_not_ok_predicts_nothing() -> None:
    default_params, duration_s, metrics, eager, _ = RESNET50
    assert eager_run_s(default_record(default_params, duration_s, {}), eager) is None
    failed = default_record(default_params, duration_s, metrics)
    assert failed.result is not None
    failed.result.status = Status.OOM
    assert eager_run_s(failed, eager) is None


def test_the_cost_models_seconds_are_floored_by_the_eager_run_only_where_it_is_longer() -> None:
    """Parking's predictions (autotune.sweep.loop): GPT-2's first draw priced at the default's 20.2 s, the informed
    start at its compile's rest plus a repeat; the floor lifts the eager draw alone."""
    default_params, duration_s, metrics, eager, _ = GPT2
    default = default_record(default_params, duration_s, metrics)
    informed = {**eager, "precision": "bf16", "compile_mode": "default"}
    short = {**eager, "batch_size": 8}
    seconds = Seconds(np.array([20.2, 33.8, 20.2]), np.array([0.0, 10.0, 0.0]))
    lifted = floored(seconds, default, [eager, informed, short])
    assert lifted.trial[0] == pytest.approx(eager_run_s(default, eager))
    assert list(lifted.trial[1:]) == [33.8, 20.2] and list(lifted.waiting) == [0.0, 10.0, 0.0]
    assert floored(seconds, None, [eager, informed, short]) is seconds  # no default measured: as priced


def test_a_batch_of_numpys_int_scales_and_one_that_is_no_number_does_not() -> None:
    default_params, duration_s, metrics, eager, _ = GPT2
    default = default_record(default_params, duration_s, metrics)
    assert eager_run_s(default, {**eager, "batch_size": np.int64(64)}) == eager_run_s(default, eager)
    for odd in (True, "64", None, 0):
        assert eager_run_s(default, {**eager, "batch_size": odd}) == eager_run_s(default, {**eager, "batch_size": 16})
