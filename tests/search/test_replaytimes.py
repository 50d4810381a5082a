"""Replay with trial times: each replayed trial costs its recorded seconds, compile cache and pruning included,
and the record model reads those seconds as the trials' durations."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import optuna
import pytest
from study_records import records_of

from autotune.measurement import Status
from autotune.search.replay import ReplayRecords
from autotune.search.replaytimes import TimedReplay
from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.trial.pruning import Pruning
from autotune.views.progress import Progress

SPACE = """\
# autotune sweep toy.yaml --replay toy.json
workload: {name: gpt2, preset: tiny}
device: cpu
objective: {metric: throughput, direction: maximize}
budget: {trials: 4}
sampler: {name: grid, seed: 0}
params:
  compile_mode: [none, default]
  fused_optimizer: [false, true]
"""


def _compiled(fused: bool, throughput: float) -> dict[str, Any]:
    return {
        "params": {"compile_mode": "default", "fused_optimizer": fused},
        "status": "ok",
        "throughput": throughput,
        "throughput_unit": "samples/s",
        "duration_s": 40.0 + fused,
        "compile_s": 30.0,
        "cached_compile_s": 3.0,
        "probe_s": 4.0,
        "eager_probe_throughput": 100.0 + fused,
        "window_s": 3.0,
    }


RECORDS = [
    {
        "params": {"compile_mode": "none", "fused_optimizer": False},
        "status": "ok",
        "throughput": 100.0,
        "duration_s": 10.0,
    },
    {
        "params": {"compile_mode": "none", "fused_optimizer": True},
        "status": "ok",
        "throughput": 101.0,
        "duration_s": 11.0,
    },
    _compiled(False, 150.0),
    _compiled(True, 151.0),
]


@pytest.fixture
def replay(tmp_path: Path) -> TimedReplay:
    path = tmp_path / "toy.json"
    path.write_text(json.dumps(RECORDS))
    return TimedReplay(ReplayRecords.load(path))


def test_a_graph_compiled_before_compiles_from_the_cache(replay: TimedReplay) -> None:
    first = replay.answer({"compile_mode": "default", "fused_optimizer": False})
    again = replay.answer({"compile_mode": "default", "fused_optimizer": True})  # the same graph: fused is not compiled
    assert (first.metrics["duration_s"], first.metrics["compile_s"]) == (40.0, 30.0)
    assert (again.metrics["duration_s"], again.metrics["compile_s"]) == (41.0 - 30.0 + 3.0, 3.0)
    assert first.status is again.status is Status.OK
    assert first.metrics["throughput_unit"] == "samples/s"  # a record's unit is kept, as a string


def test_pruned_before_compiling_costs_the_probe(replay: TimedReplay) -> None:
    # Eager 100 x the study's gain 1.2 = 120 cannot reach 140: stopped before compiling.
    result = replay.answer({"compile_mode": "default", "fused_optimizer": False}, Pruning(140.0, 1.2))
    assert result.status is Status.PRUNED
    assert result.metrics["duration_s"] == 4.0
    assert result.metrics["pruned_before_compile"] == 1.0
    assert result.metrics["throughput"] == pytest.approx(120.0)
    # It compiled nothing: the next trial of that graph pays the whole compile.
    assert replay.answer({"compile_mode": "default", "fused_optimizer": True}).metrics["compile_s"] == 30.0


def test_an_eager_record_with_a_probe_is_pruned_before_cudnn_search_at_the_probe_s_cost(tmp_path: Path) -> None:
    searched: dict[str, Any] = {
        "params": {"compile_mode": "none", "cudnn_benchmark": True},
        "status": "ok",
        "throughput": 90.0,
    }
    timed = {**searched, "duration_s": 160.0, "eager_probe_throughput": 80.0, "window_s": 3.0}
    path = tmp_path / "searched.json"
    path.write_text(json.dumps([{**timed, "probe_s": 2.0}]))
    result = TimedReplay(ReplayRecords.load(path)).answer(searched["params"], Pruning(140.0, 1.5))
    assert result.status is Status.PRUNED and result.reason is not None
    assert result.reason.startswith("before cuDNN's algorithm search: eager 80 x 1.50")
    assert result.metrics["duration_s"] == 2.0
    path.write_text(json.dumps([timed]))  # without probe_s: what its probe cost is unknown, so it runs its warm-up
    result = TimedReplay(ReplayRecords.load(path)).answer(searched["params"], Pruning(140.0, 1.5))
    assert result.status is Status.PRUNED and result.reason is not None and result.reason.startswith("warm-up ")


def test_an_eager_record_whose_kernels_were_a_small_share_of_its_probe_is_pruned_on_that_share(tmp_path: Path) -> None:
    # As the trial job decides: the kernels took 10% of the probe's steps, so autotuning them gains at most
    # PROBE_SPREAD / 0.9 = 1.28x; 100 x 1.28 cannot reach 140, with or without a gain learnt by the study.
    autotuned: dict[str, Any] = {"params": {"compile_mode": "none"}, "status": "ok", "throughput": 101.0}
    timed = {**autotuned, "duration_s": 15.0, "eager_probe_throughput": 100.0, "probe_s": 2.0, "window_s": 3.0}
    path = tmp_path / "autotuned.json"
    path.write_text(json.dumps([{**timed, "eager_probe_autotuning_share": 0.1}]))
    for learnt in (None, 3.0):
        result = TimedReplay(ReplayRecords.load(path)).answer(autotuned["params"], Pruning(140.0, learnt))
        assert result.status is Status.PRUNED and result.reason is not None
        assert result.reason.startswith("before the kernels' autotuning: eager 100 x 1.28 (the most autotuning can")
        assert result.metrics["duration_s"] == 2.0
    path.write_text(json.dumps([timed]))  # a record from before the share was recorded: the study's gain only
    result = TimedReplay(ReplayRecords.load(path)).answer(autotuned["params"], Pruning(140.0, 3.0))
    assert result.status is Status.PRUNED and result.reason is not None and result.reason.startswith("warm-up ")


def test_pruned_after_warm_up_skips_the_timed_window(replay: TimedReplay) -> None:
    result = replay.answer({"compile_mode": "default", "fused_optimizer": False}, Pruning(200.0, 3.0))
    assert result.status is Status.PRUNED
    assert result.metrics["duration_s"] == 40.0 - 3.0
    assert result.metrics["compile_s"] == 30.0  # it compiled, then showed it is slow


def test_an_untimed_record_set_is_answered_as_before(tmp_path: Path) -> None:
    path = tmp_path / "untimed.json"
    path.write_text(json.dumps([{"params": {"x": 1}, "status": "ok", "throughput": 5.0}]))
    result = TimedReplay(ReplayRecords.load(path)).answer({"x": 1}, Pruning(100.0, 2.0))
    assert result.status is Status.OK and "duration_s" not in result.metrics


def test_a_replayed_sweep_s_records_read_the_replayed_durations(tmp_path: Path) -> None:
    (tmp_path / "toy.json").write_text(json.dumps(RECORDS))
    (tmp_path / "toy.yaml").write_text(SPACE)
    space = load_space(tmp_path / "toy.yaml", replay=True)
    options = SweepOptions(
        report=False, storage=f"sqlite:///{tmp_path / 'toy.db'}", replay=tmp_path / "toy.json", tracking=False
    )
    run_sweep(space, options, progress=Progress(None, None, stream=io.StringIO()))
    records = records_of(optuna.load_study(study_name="toy-replay", storage=options.storage))
    ordered = sorted(records.measured, key=lambda r: r.number)
    assert sorted(r.duration_s for r in ordered) == [10.0, 11.0, 14.0, 40.0]  # the second compile hit the cache
    assert sorted(r.compile_s for r in ordered) == [0.0, 0.0, 3.0, 30.0]
    assert records.time().trial_s == pytest.approx(75.0)
    assert records.time().compile_s == pytest.approx(33.0)
    # Within 2% of the winner (151): the first compiled trial (150), whichever that was.
    first_compiled = next(i for i, r in enumerate(ordered) if r.params["compile_mode"] == "default")
    expected = sum(r.duration_s for r in ordered[: first_compiled + 1])
    assert records.time_to_within(0.02) == pytest.approx((expected, first_compiled + 1))
    assert records.time_to_within(0.02, target=101.0) == pytest.approx((ordered[0].duration_s, 1))  # 100 is within
    assert records.time_to_within(0.02, target=1000.0) is None  # never within 2% of a better target
