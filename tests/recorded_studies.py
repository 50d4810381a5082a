"""Studies recorded the way a sweep records its trials, for tests of the record model and of every view of it."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.measurement import Status, TrialResult
from autotune.records import StudyInfo, StudyRecords, TrialKind, TrialRecord, schema
from autotune.space.settings import Direction

THROUGHPUT = (("throughput", "maximize"),)
THROUGHPUT_AND_MEMORY = (("throughput", "maximize"), ("peak_mem_gib", "minimize"))
PLACEHOLDER = -1.0  # what a sweep reports to Optuna for an infeasible trial: never to be trusted


def make_info(objectives: tuple[tuple[str, str], ...] = THROUGHPUT, workload: str = "resnet50") -> StudyInfo:
    return StudyInfo(workload, "full", "cuda", "search_spaces/x.yaml", "params: {}\n", objectives)


def make_study(folder: Path | None, info: StudyInfo, name: str = "s") -> optuna.Study:
    """A real study (in a sqlite file in ``folder``, or in memory), carrying its StudyInfo as a sweep stores it."""
    # StudyInfo keeps its directions as plain strings; a sweep wrote them from a space's Direction values
    directions = cast("list[Direction]", [direction for _, direction in info.objectives])
    storage = f"sqlite:///{folder}/s.db" if folder is not None else None
    study = optuna.create_study(storage=storage, study_name=name, directions=directions)
    study.set_user_attr(schema.STUDY_ATTR_INFO, info.to_dict())
    return study


def trial_attrs(
    result: TrialResult,
    *,
    default: bool = False,
    violation: float = 0.0,
    remeasured: dict[str, Any] | None = None,
    mlflow_run_id: str | None = None,
    reason: str | None = None,
    kind: TrialKind = TrialKind.MEASURED,
    informed: bool = False,
    twin: bool = False,
) -> dict[str, Any]:
    """A finished trial's user attributes, as the recorder writes them (the informed start's and its twin's marks as
    their queueing sets them)."""
    record = result.to_dict()
    record.pop("series")
    attrs: dict[str, Any] = {
        schema.ATTR_RESULT: record,
        schema.ATTR_PARAMS: dict(result.params),
        schema.ATTR_KIND: kind.value,
        schema.ATTR_STATUS: result.status.value,
        schema.ATTR_REASON: reason or result.reason,
        schema.ATTR_DEFAULT: default,
        schema.ATTR_VIOLATION: violation,
    }
    if remeasured is not None:
        attrs[schema.ATTR_REMEASURED] = remeasured
    if mlflow_run_id is not None:
        attrs[schema.ATTR_MLFLOW_RUN] = mlflow_run_id
    if informed:
        attrs[schema.ATTR_INFORMED] = True
    if twin:
        attrs[schema.ATTR_TWIN] = True
    return attrs


def add_trial(study: optuna.Study, info: StudyInfo, result: TrialResult, **kwargs: Any) -> int:
    """Record a measured trial as a sweep does (COMPLETE for ok and oom, PRUNED, FAIL otherwise); its number."""
    if result.status is Status.OOM:
        kwargs["violation"] = max(kwargs.get("violation", 0.0), 1.0)
    attrs = trial_attrs(result, **kwargs)
    violation = attrs[schema.ATTR_VIOLATION]
    values = None
    if result.status in (Status.OK, Status.OOM):
        state = optuna.trial.TrialState.COMPLETE
        feasible = result.ok and violation <= 0
        values = [result.metrics[m] if feasible else PLACEHOLDER for m, _ in info.objectives]
    else:
        state = optuna.trial.TrialState.PRUNED if result.status is Status.PRUNED else optuna.trial.TrialState.FAIL
    study.add_trial(optuna.trial.create_trial(state=state, values=values, user_attrs=attrs))
    return len(study.trials) - 1


def record_of(study: optuna.Study, info: StudyInfo, number: int) -> tuple[StudyRecords, TrialRecord]:
    """The study's records now, and trial ``number``'s."""
    records = StudyRecords.read(study, info)
    return records, records.trial(number)


def ok_result(throughput: float, peak_mem_gib: float = 10.0, /, **params: Any) -> TrialResult:
    metrics = {
        "throughput": throughput,
        "throughput_unit": "images/s",
        "step_ms_p50": 128_000 / throughput,
        "peak_mem_gib": peak_mem_gib,
        "energy_j_per_sample": 0.05,
    }
    env = {"device": "cuda", "gpu": "NVIDIA H200", "torch": "2.11.0", "cuda": "13.0", "triton": "3.6.0"}
    return TrialResult(Status.OK, None, {"precision": "default", **params}, metrics, env)


def failed(status: Status, reason: str, **params: Any) -> TrialResult:
    return TrialResult.failed(status, reason, {"precision": "default", **params})


def add_timed(
    study: optuna.Study,
    mode: str,
    seconds: float,
    compile_s: float,
    value: float,
    finalist_of: int | None = None,
    **knobs: object,
) -> int:
    """A measured trial that lasted ``seconds``, ``compile_s`` of them compiling (under ``mode``; compiled, it records
    compile artifacts, as a sweep's trials do); a batch size of its own unless ``knobs`` say otherwise."""
    params = {"compile_mode": mode, "batch_size": len(study.trials) + 1, **knobs}
    result = TrialResult(Status.OK, None, params, {"throughput": value, "compile_s": compile_s})
    if mode != "none":  # as a sweep's compiled trial records what it saved of its compile
        digest = f"{len(study.trials):064x}"
        saved = {"file": f"{digest}.bin", "sha256": digest, "bytes": 1, "env": {"torch": "2.13.0"}}
        result.extra["compile_artifacts"] = saved
    attrs = trial_attrs(result)
    if finalist_of is not None:
        attrs[schema.ATTR_FINALIST_OF] = finalist_of
        attrs[schema.ATTR_PARAMS] = {**params, "inductor": "coordinate_descent_tuning=true"}
    start = datetime(2026, 11, 25, 12, 0, 0)
    study.add_trial(
        FrozenTrial(
            number=0,
            state=TrialState.COMPLETE,
            value=None,
            values=[value],
            datetime_start=start,
            datetime_complete=start + timedelta(seconds=seconds),
            params={},
            distributions={},
            user_attrs=attrs,
            system_attrs={},
            intermediate_values={},
            trial_id=0,
        )
    )
    return len(study.trials) - 1
