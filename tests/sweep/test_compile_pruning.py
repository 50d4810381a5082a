"""What the first steps' one-off work gains: learnt from a sweep's probed trials, handed to the next ones."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from autotune.measurement import Status, TrialResult
from autotune.space import load_space
from autotune.sweep import SweepOptions
from autotune.sweep.loop import Sweep
from autotune.sweep.proposals.compile_pruning import GAIN_MARGIN, MIN_EVIDENCE, compile_gain_bound
from autotune.trial.pruning import Pruning
from autotune.views.progress import Progress


def _result(mode: str, eager: float, compiled: float, status: Status = Status.OK, **extra: float) -> TrialResult:
    metrics = {"throughput": compiled, "eager_probe_throughput": eager, **extra}
    return TrialResult(status, None, {"compile_mode": mode}, metrics)


def _searched(eager: float, measured: float, status: Status = Status.OK) -> TrialResult:
    """An eager trial with cuDNN's algorithm search, probed without it."""
    metrics = {"throughput": measured, "eager_probe_throughput": eager}
    return TrialResult(status, None, {"compile_mode": "none", "cudnn_benchmark": True}, metrics)


def test_no_bound_before_enough_probed_trials() -> None:
    evidence = [_result("default", 100, 150)] * (MIN_EVIDENCE - 1)
    assert compile_gain_bound({"compile_mode": "default"}, evidence) is None
    unprobed = TrialResult(Status.OK, None, {"compile_mode": "none"}, {"throughput": 9000.0})
    assert compile_gain_bound({"compile_mode": "none"}, [*evidence, unprobed, unprobed]) is None  # nothing to skip


def test_the_bound_is_the_largest_gain_of_any_mode_with_margin() -> None:
    evidence = [
        _result("default", 100, 150),
        _result("default", 100, 120, Status.PRUNED),  # pruned after warm-up: compiled, so a gain too
        _result("default", 100, 900, Status.PRUNED, pruned_before_compile=1.0),  # a bound, not a measurement
        _result("default", 100, 9000, Status.OOM),
        TrialResult(Status.OK, None, {"compile_mode": "none"}, {"throughput": 9000.0}),  # not probed: no gain
    ]
    assert compile_gain_bound({"compile_mode": "default"}, evidence) == 1.5 * GAIN_MARGIN
    graphs = [*evidence, _result("reduce-overhead", 100, 250)]  # CUDA graphs gain most where launches dominate
    assert compile_gain_bound({"compile_mode": "default"}, graphs) == 2.5 * GAIN_MARGIN


def test_cudnn_search_and_kernel_autotuning_are_one_off_work_too() -> None:
    searched = {"compile_mode": "none", "cudnn_benchmark": True}
    evidence = [_searched(100, 110), _searched(100, 105, Status.PRUNED)]  # pruned after its warm-up: measured
    assert compile_gain_bound(searched, evidence) == 1.1 * GAIN_MARGIN
    assert compile_gain_bound(searched, [*evidence, _result("default", 100, 140)]) == 1.4 * GAIN_MARGIN
    # An eager trial whose kernels autotuned (probed on their first configs) gained little: evidence for another
    # such configuration, not for a compile or cuDNN's search, whose bound it would set too low.
    autotuned = [_result("none", 100, 101), _result("none", 100, 99)]
    eager = {"compile_mode": "none"}
    assert compile_gain_bound(eager, autotuned) == 1.01 * GAIN_MARGIN
    assert compile_gain_bound({"compile_mode": "default"}, autotuned) is None
    assert compile_gain_bound(searched, [*evidence, *autotuned]) == 1.1 * GAIN_MARGIN
    assert compile_gain_bound(eager, [*evidence, *autotuned, _result("default", 100, 140)]) == 1.4 * GAIN_MARGIN


def test_compiling_that_loses_still_leaves_a_bound_of_at_least_the_margin() -> None:
    evidence = [_result("default", 100, 80)] * MIN_EVIDENCE
    assert compile_gain_bound({"compile_mode": "default"}, evidence) == GAIN_MARGIN


SPACE = """\
workload: {name: "tests.trial_workloads:tiny_mlp", preset: tiny}
device: cpu
budget: {trials: 14}
sampler: {name: random, seed: 3}
params:
  compile_mode: [none, default]
  batch_size: {choices: [1, 2, 4, 8, 16, 32, 64], ordinal: true, default: 64}
"""


def test_the_sweep_hands_each_trial_the_bound_its_study_has_measured(tmp_path: Path) -> None:
    (tmp_path / "space.yaml").write_text(SPACE)
    given: list[tuple[dict[str, Any], Pruning | None]] = []

    def executor(params: dict[str, Any], _timeout: float, pruning: Pruning | None) -> TrialResult:
        given.append((params, pruning))
        eager = 10.0 * params["batch_size"]
        if params["compile_mode"] == "none":
            return TrialResult(Status.OK, None, params, {"throughput": eager})
        return TrialResult(Status.OK, None, params, {"throughput": 2 * eager, "eager_probe_throughput": eager})

    options = SweepOptions(
        report=False, storage=f"sqlite:///{tmp_path}/s.db", tracking=False, remeasure_top=0, rehearse_start=False
    )
    Sweep(load_space(tmp_path / "space.yaml"), options, executor, Progress(None, None, io.StringIO())).run()
    compiled_before = 0
    for params, pruning in given:
        assert pruning is not None
        # Every configuration is handed a bound (an eager one probes where its kernels would autotune): the
        # compiled trials before it, the only ones probed here, are its evidence.
        assert pruning.compile_gain == (2 * GAIN_MARGIN if compiled_before >= MIN_EVIDENCE else None)
        compiled_before += params["compile_mode"] != "none"
    assert compiled_before > MIN_EVIDENCE  # the bound was handed out, not only withheld
    assert given[0][1] == Pruning(None, None)  # the first trial has no best to prune against
