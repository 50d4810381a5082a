"""The record model: read incrementally it must match a full read, whoever wrote the trials; the figures it
defines once (feasibility, rank, winner, speedup, tally, time shares) as every view then shows them."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from autotune.measurement import Status, TrialResult
from autotune.records import StudyRecords, TrialKind, schema
from autotune.records.trial import TrialRecord
from autotune.storage.rdb import open_storage
from autotune.sweep.recorder import placeholder_values

OBJECTIVES = (("throughput", "maximize"),)


def _study(path: Path) -> optuna.Study:
    """A study on a real SQLite file, opened as a sweep opens it (a second open is another worker)."""
    return optuna.create_study(
        storage=open_storage(f"sqlite:///{path}"), study_name="records", direction="maximize", load_if_exists=True
    )


def _record(study: optuna.Study, params: dict[str, Any], throughput: float | None, **attrs: Any) -> None:
    """One finished measured trial, stored as the recorder stores it (``violation`` > 0: a constraint broken)."""
    trial = study.ask()
    status = Status(attrs.pop("status", Status.OK if throughput is not None else Status.CRASH))
    metrics = {"throughput": throughput, "throughput_unit": "samples/s", **attrs.pop("metrics", {})}
    if throughput is None:
        metrics = {}
    result = TrialResult(status, None if status is Status.OK else "boom", params, metrics)
    result.kernels = attrs.pop("kernels", {})
    trial.set_user_attr(schema.ATTR_PARAMS, params)
    trial.set_user_attr(schema.ATTR_KIND, attrs.pop("kind", TrialKind.MEASURED.value))
    trial.set_user_attr(schema.ATTR_RESULT, result.to_dict())
    trial.set_user_attr(schema.ATTR_STATUS, status.value)
    violation = attrs.pop("violation", -1.0)
    for key, value in attrs.items():
        trial.set_user_attr(key, value)
    if status is Status.PRUNED:
        study.tell(trial, state=TrialState.PRUNED)
    elif throughput is None:
        study.tell(trial, state=TrialState.FAIL)
    else:
        trial.set_user_attr(schema.ATTR_VIOLATION, violation)
        study.tell(trial, throughput)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "study.db"


def test_the_records_see_another_workers_trials_at_each_refresh(db: Path) -> None:
    mine, theirs = _study(db), _study(db)
    records = StudyRecords(mine, OBJECTIVES)
    _record(theirs, {"bs": 8}, 100.0, **{schema.ATTR_DEFAULT: True})
    assert records.tally().measured == 0  # not read yet
    records.refresh()
    _record(theirs, {"bs": 16}, 250.0)
    _record(mine, {"bs": 32}, None)
    records.refresh()

    assert [r.number for r in records.measured] == [0, 1, 2]
    assert records.tally() == StudyRecords(mine, OBJECTIVES).tally()  # what a full read says
    assert records.measured_with({"bs": 16}, excluding=99) is not None
    assert records.measured_with({"bs": 64}, excluding=99) is None
    winner = records.winner
    assert winner is not None and (winner.number, winner.value, records.speedup(winner)) == (1, 250.0, 2.5)


def test_a_configuration_another_worker_is_running_is_found(db: Path) -> None:
    mine, theirs = _study(db), _study(db)
    records = StudyRecords(mine, OBJECTIVES)
    running = theirs.ask()
    running.set_user_attr(schema.ATTR_PARAMS, {"bs": 8})
    records.refresh()
    found = records.measured_with({"bs": 8}, excluding=running.number + 1)
    assert found is not None and found.state is TrialState.RUNNING and found.outcome == "running"
    assert records.measured_with({"bs": 8}, excluding=running.number) is None  # itself is no repeat


def test_patience_placeholder_and_remeasured_medians(db: Path) -> None:
    study = _study(db)
    for bs, value in ((8, 100.0), (16, 300.0), (32, 200.0), (64, 150.0)):
        _record(study, {"bs": bs}, value, **({schema.ATTR_DEFAULT: True} if bs == 8 else {}))
    _record(study, {"bs": 128}, None)
    records = StudyRecords(study, OBJECTIVES)
    assert records.trials_since_best() == 3  # 200, 150 and the crash came after the best
    assert placeholder_values(records) == [100.0]  # the worst feasible value told to Optuna
    assert records.winner is not None and records.winner.number == 1

    records.note_remeasured(1, {"metric": "throughput", "values": [120.0], "median": 120.0})
    records.note_remeasured(2, {"metric": "throughput", "values": [210.0], "median": 210.0})
    winner = records.winner
    assert winner is not None and (winner.number, winner.value) == (2, 210.0)  # re-measured medians rank
    assert winner.value_is == "median of 1 re-measurements" and winner.first_values == (200.0,)
    assert records.trials_since_best() == 2  # by ranked values: 210 at trial 2 is the best
    assert placeholder_values(records) == [100.0]  # Optuna's values are first measurements: unchanged


def test_remeasurements_stored_on_the_study_are_read(db: Path) -> None:
    study = _study(db)
    _record(study, {"bs": 8}, 100.0, **{schema.ATTR_DEFAULT: True})
    _record(study, {"bs": 16}, 400.0, metrics={"step_ms_p50": 40.0})
    data = {"metric": "throughput", "values": [190.0, 200.0, 210.0], "median": 200.0, "cv": 0.04}
    study.set_user_attr(schema.remeasured_key(1), {**data, "metrics": {"throughput": 200.0, "step_ms_p50": 80.0}})
    record = StudyRecords(study, OBJECTIVES).trial(1)
    assert record.value == 200.0 and record.metrics["step_ms_p50"] == 80.0  # the same runs' medians
    assert record.first_metrics["step_ms_p50"] == 40.0


def test_duplicates_and_rejections_do_not_count_as_measured(db: Path) -> None:
    study = _study(db)
    _record(study, {"bs": 8}, 100.0)
    _record(study, {"bs": 8}, 100.0, kind=TrialKind.DUPLICATE.value)
    _record(study, {"bs": 9}, None, kind=TrialKind.REJECTED.value)
    records = StudyRecords(study, OBJECTIVES)
    assert records.total == 3
    assert [r.number for r in records.measured] == [0]
    found = records.measured_with({"bs": 8}, excluding=5)
    assert found is not None and found.number == 0
    assert records.not_run() == {"rejected": 1, "duplicate": 1}


def test_infeasible_trials_never_rank_and_are_counted(db: Path) -> None:
    study = _study(db)
    _record(study, {"bs": 8}, 100.0, **{schema.ATTR_DEFAULT: True})
    _record(study, {"bs": 16}, 500.0, violation=2.0)  # faster, but broke a constraint
    _record(study, {"bs": 32}, 150.0)
    _record(study, {"bs": 64}, 90.0, status=Status.PRUNED)
    records = StudyRecords(study, OBJECTIVES)
    assert [r.number for r in records.ranked] == [2, 0]
    assert records.trial(1).outcome == "infeasible" and records.rank(1) is None
    assert [r.number for r in records.faster_infeasible()] == [1]
    assert records.tally() == records.tally().__class__(measured=4, pruned=1, failed=0, infeasible=1)
    assert records.trial(3).outcome == "pruned" and records.trial(3).value is None  # a warm-up estimate never ranks


def test_time_shares_count_compile_only_for_compiled_trials(db: Path) -> None:
    study = _study(db)
    _record(study, {"compile_mode": "none"}, 100.0, metrics={"compile_s": 5.0})  # warm-up, not compile
    _record(study, {"compile_mode": "default"}, 200.0, metrics={"compile_s": 30.0})
    _record(study, {"compile_mode": "default", "bs": 2}, 50.0, status=Status.PRUNED, metrics={"compile_s": 20.0})
    records = StudyRecords(study, OBJECTIVES)
    durations = [r.duration_s for r in records.measured]
    time = records.time()
    assert time.compile_s == pytest.approx(min(30.0, durations[1]) + min(20.0, durations[2]))
    assert time.trial_s == pytest.approx(sum(durations))
    assert time.pruned_s == pytest.approx(durations[2])
    assert sum(seconds for label, seconds in time.parts().items() if "re-measuring" not in label) == pytest.approx(
        time.trial_s
    )


def test_time_shares_of_long_trials() -> None:
    """Durations come from the trials' own start and end; a compile never counts for more than its trial."""
    from autotune.records.timeshares import time_shares

    start = datetime(2026, 1, 1)

    def record(number: int, seconds: float, compile_s: float, status: Status) -> TrialRecord:
        result = TrialResult(status, None, {"compile_mode": "default"}, {"throughput": 1.0, "compile_s": compile_s})
        return TrialRecord(
            number, TrialState.COMPLETE, TrialKind.MEASURED, {}, result, status.value, None, False, -1.0, (1.0,),
            (1.0,), started=start, ended=start + timedelta(seconds=seconds),
        )  # fmt: skip

    time = time_shares([record(0, 60, 30, Status.OK), record(1, 20, 50, Status.PRUNED)])
    assert (time.trial_s, time.compile_s, time.pruned_s) == (80.0, 50.0, 20.0)
    assert time.line() == "trial time 1.3 min: compiling 0.8 min (62%), in trials that ended pruned 0.3 min (25%)"


def _ok_record(number: int, mode: str, metrics: dict[str, float], seconds: float) -> TrialRecord:
    """An ok measured trial of ``compile_mode`` ``mode`` with ``metrics``, ``seconds`` long."""
    start = datetime(2026, 1, 1)
    result = TrialResult(Status.OK, None, {"compile_mode": mode}, {"throughput": 1.0, **metrics})
    return TrialRecord(
        number, TrialState.COMPLETE, TrialKind.MEASURED, {}, result, "ok", None, False, -1.0, (1.0,), (1.0,),
        started=start, ended=start + timedelta(seconds=seconds),
    )  # fmt: skip


def test_compile_phases_sum_the_compiled_trials_that_recorded_them() -> None:
    """The compiler's clocks, summed over compiled trials that have them; eager and older trials add nothing."""
    from autotune.records.timeshares import time_shares

    def record(number: int, mode: str, metrics: dict[str, float]) -> TrialRecord:
        return _ok_record(number, mode, metrics, seconds=120)

    phases = {"compile_wall_s": 40.0, "compile_inductor_s": 25.0, "compile_kernel_wait_s": 10.0}
    time = time_shares(
        [
            record(0, "none", {"compile_s": 0.0}),
            record(1, "default", {"compile_s": 48.0, **phases}),
            record(2, "reduce-overhead", {"compile_s": 50.0, **phases}),
            record(3, "default", {"compile_s": 30.0}),  # an older trial: no clocks
        ]
    )
    assert time.phases.trials == 2 and time.phases.compile_s == 98.0
    assert time.phases.seconds == {"compile_wall_s": 80.0, "compile_inductor_s": 50.0, "compile_kernel_wait_s": 20.0}
    assert time.phases.line() == (
        "compiling by the compiler's clocks (2 trials, 1.6 min): tracing 0.5 min, Inductor 0.8 min "
        "(waiting for kernel builds 0.3 min), the first steps' other one-off work 0.3 min"
    )
    assert time_shares([record(0, "default", {"compile_s": 30.0})]).phases.line() is None


def test_the_kernels_autotuning_sums_every_trial_that_recorded_it_eager_or_compiled() -> None:
    """The unpinned Triton kernels' rounds, over the trials that recorded them; the detail lines say so last."""
    from autotune.records.timeshares import time_shares

    def record(number: int, mode: str, metrics: dict[str, float]) -> TrialRecord:
        return _ok_record(number, mode, metrics, seconds=60)

    time = time_shares(
        [
            record(0, "none", {"compile_s": 14.0, "kernel_autotune_s": 12.0, "kernel_autotune_compile_s": 3.0}),
            record(1, "default", {"compile_s": 40.0, "kernel_autotune_s": 24.0, "kernel_autotune_compile_s": 3.0}),
            record(2, "default", {"compile_s": 20.0}),  # its kernels' choices came from the study's cache
        ]
    )
    assert (time.autotuning.trials, time.autotuning.seconds, time.autotuning.compile_s) == (2, 36.0, 6.0)
    assert time.detail_lines() == [
        "Triton kernels autotuning in their trials: 2 trials, 0.6 min, 0.1 min of it compiling their configs"
    ]
    assert time_shares([record(0, "default", {"compile_s": 20.0})]).detail_lines() == []


def test_time_to_within_two_percent_of_the_winner(db: Path) -> None:
    """Trial time, in the order the trials started, until one within 2% of the winner's ranked value finished."""
    study = _study(db)
    for bs, value in ((8, 100.0), (16, 295.0), (32, 200.0), (64, 300.0)):
        _record(study, {"bs": bs}, value)
    records = StudyRecords(study, OBJECTIVES)
    durations = [r.duration_s for r in records.measured]
    assert records.time_to_within(0.02) == pytest.approx((sum(durations[:2]), 2))  # 295 is within 2% of 300
    assert records.time_to_within(0.001) == pytest.approx((sum(durations), 4))  # only the winner itself
    assert StudyRecords(_study(db.with_name("empty.db")), OBJECTIVES).time_to_within() is None


def test_views_show_the_batch_size_a_trial_used_where_the_space_does_not_tune_it(db: Path) -> None:
    """The configuration stays what was proposed (a repeat is recognised by it); what views show is what ran."""
    study = _study(db)
    trial = study.ask()
    result = TrialResult(Status.OK, None, {"precision": "bf16", "batch_size": 64, "compile_mode": None}, {})
    result.metrics = {"throughput": 10.0}
    trial.set_user_attr(schema.ATTR_PARAMS, {"precision": "bf16"})
    trial.set_user_attr(schema.ATTR_KIND, TrialKind.MEASURED.value)
    trial.set_user_attr(schema.ATTR_RESULT, result.to_dict())
    study.tell(trial, 10.0)
    record = StudyRecords(study, OBJECTIVES).trial(0)
    assert record.params == {"precision": "bf16"}
    assert record.ran_with == {"precision": "bf16", "batch_size": 64}


def test_a_record_cut_short_by_a_dead_worker_is_not_measured(db: Path) -> None:
    """A worker killed after writing an ok result but before finishing the trial: not measured, the retry is."""
    study = _study(db)
    trial = study.ask()
    result = TrialResult(Status.OK, None, {"bs": 8}, {"throughput": 10.0})
    trial.set_user_attr(schema.ATTR_PARAMS, {"bs": 8})
    trial.set_user_attr(schema.ATTR_RESULT, result.to_dict())
    trial.set_user_attr(schema.ATTR_KIND, TrialKind.MEASURED.value)  # the kind was written, the trial not ended
    study.tell(trial, state=TrialState.FAIL)  # what failing an orphan (or a stale heartbeat) leaves
    record = StudyRecords(study, OBJECTIVES).trial(0)
    assert not record.measured and record.outcome == "abandoned"
    assert StudyRecords(study, OBJECTIVES).tally().measured == 0


def _launched(count: int) -> dict[str, Any]:
    """A listed kernel's entry in a trial's result, as the trial records it."""
    return {"config": "BLOCK=64", "launches": count, "shape_keys": [[64, "torch.float32"]] if count else []}


def test_a_listed_kernel_never_run_is_one_that_no_finished_trial_launched(db: Path) -> None:
    study = _study(db)
    chosen = {"chosen_by": "autotune", "by_shape": []}  # a kernel that chose for itself: no launches to count
    _record(study, {"norm": "torch"}, 10.0, kernels={"k:norm": _launched(0), "k:head": _launched(0), "k:own": chosen})
    _record(study, {"norm": "triton"}, None, status=Status.PRUNED, kernels={"k:head": _launched(5)})  # not finished
    records = StudyRecords(study, OBJECTIVES)
    assert records.kernels_never_run() == ["k:head", "k:norm"]
    _record(study, {"norm": "triton"}, 12.0, kernels={"k:norm": _launched(3), "k:head": _launched(0)})
    records.refresh()
    assert records.kernels_never_run() == ["k:head"]  # the torch-norm trial routed around k:norm: no news
