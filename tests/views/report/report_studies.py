"""Studies for the report tests: real SQLite studies recorded the way a sweep records them.

Each trial carries Optuna's own params (an ordinal's index, as the sweep stores it), the real values in
``autotune.params``, a start and an end (so the report can account for time), and a ``compile_s`` metric.
"""

from __future__ import annotations

import datetime
import random
from pathlib import Path
from typing import Any, cast

import optuna
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from autotune.measurement import Status, TrialResult
from autotune.records import StudyInfo, TrialKind, schema
from autotune.space.settings import Direction

BATCHES = [16, 32, 64, 128, 256]
PRECISIONS = ["default", "fp32", "tf32", "bf16", "fp16"]
COMPILE_MODES = ["none", "default", "reduce-overhead"]
DISTRIBUTIONS = {
    "batch_size": IntDistribution(0, len(BATCHES) - 1),  # ordinal: Optuna holds the index
    "precision": CategoricalDistribution(PRECISIONS),
    "compile_mode": CategoricalDistribution(COMPILE_MODES),
}
ENV = {"device": "cuda", "gpu": "NVIDIA H200", "torch": "2.11.0", "cuda": "13.0", "driver": "580.82"}
DEFAULT = {"batch_size": 64, "precision": "default", "compile_mode": "none"}
START = datetime.datetime(2025, 1, 1, 0, 0, 0)


def make_info(multi: bool = False) -> StudyInfo:
    objectives = (("throughput", "maximize"), ("peak_mem_gib", "minimize")) if multi else (("throughput", "maximize"),)
    return StudyInfo("resnet50", "full", "cuda", "search_spaces/resnet50.yaml", "params: {}\n", objectives)


def make_study(path: Path, info: StudyInfo, name: str = "rn50") -> optuna.Study:
    # StudyInfo keeps its directions as plain strings; a sweep wrote them from a space's Direction values
    directions = cast("list[Direction]", [d for _, d in info.objectives])
    study = optuna.create_study(storage=f"sqlite:///{path}", study_name=name, directions=directions)
    study.set_user_attr(schema.STUDY_ATTR_INFO, info.to_dict())
    return study


def throughput_of(params: dict[str, Any]) -> float:
    """A deterministic model of the knobs' effect: precision matters most, then compile, then the batch."""
    precision = {"default": 1000.0, "fp32": 900.0, "tf32": 1500.0, "bf16": 3000.0, "fp16": 2800.0}
    compile_gain = {"none": 1.0, "default": 1.3, "reduce-overhead": 1.35}
    batch_gain = {16: 0.8, 32: 0.9, 64: 1.0, 128: 1.05, 256: 1.08}
    return precision[params["precision"]] * compile_gain[params["compile_mode"]] * batch_gain[params["batch_size"]]


def memory_of(params: dict[str, Any]) -> float:
    return params["batch_size"] * (0.25 if params["precision"] in ("bf16", "fp16") else 0.5)


def result_for(params: dict[str, Any], status: Status = Status.OK, noise: float = 1.0) -> TrialResult:
    if status is not Status.OK and status is not Status.PRUNED:
        return TrialResult.failed(status, f"{status.value} in trial", dict(params))
    compile_s = 0.0 if params["compile_mode"] == "none" else 30.0
    metrics = {
        "throughput": throughput_of(params) * noise,
        "throughput_unit": "images/s",
        "peak_mem_gib": memory_of(params),
        "compile_s": compile_s,
    }
    return TrialResult(status, None if status is Status.OK else "slow", dict(params), metrics, dict(ENV))


def measured_trial(
    info: StudyInfo, result: TrialResult, seconds: float, index: int, *, default: bool = False, violation: float = 0.0
) -> optuna.trial.FrozenTrial:
    """A measured trial as a sweep records it (COMPLETE for ok and oom, PRUNED, FAIL otherwise), started at
    ``index`` * 10,000 s and lasting ``seconds``."""
    record = result.to_dict()
    record.pop("series")
    violation = max(violation, 1.0) if result.status is Status.OOM else violation
    attrs = {
        schema.ATTR_RESULT: record,
        schema.ATTR_PARAMS: dict(result.params),
        schema.ATTR_KIND: TrialKind.MEASURED.value,
        schema.ATTR_STATUS: result.status.value,
        schema.ATTR_REASON: result.reason,
        schema.ATTR_DEFAULT: default,
        schema.ATTR_VIOLATION: violation,
    }
    params = {**result.params, "batch_size": BATCHES.index(result.params["batch_size"])}
    values = None
    state = {Status.OK: TrialState.COMPLETE, Status.OOM: TrialState.COMPLETE, Status.PRUNED: TrialState.PRUNED}.get(
        result.status, TrialState.FAIL
    )
    if state is TrialState.COMPLETE:
        feasible = result.ok and violation <= 0
        values = [float(result.metrics[m]) if feasible else -1.0 for m, _ in info.objectives]
    trial = optuna.trial.create_trial(
        state=state, values=values, params=params, distributions=DISTRIBUTIONS, user_attrs=attrs
    )
    trial.datetime_start = START + datetime.timedelta(seconds=10_000 * index)
    trial.datetime_complete = trial.datetime_start + datetime.timedelta(seconds=seconds)
    return trial


def add_measured(
    study: optuna.Study,
    info: StudyInfo,
    result: TrialResult,
    seconds: float,
    *,
    default: bool = False,
    violation: float = 0.0,
) -> int:
    """Record one measured trial (see :func:`measured_trial`); returns its number."""
    number = len(study.get_trials(deepcopy=False))
    study.add_trial(measured_trial(info, result, seconds, number, default=default, violation=violation))
    return number


def add_skipped(study: optuna.Study, kind: TrialKind) -> None:
    """A proposal that cost no GPU time (rejected, duplicate)."""
    attrs = {schema.ATTR_KIND: kind.value}
    study.add_trial(optuna.trial.create_trial(state=TrialState.FAIL, user_attrs=attrs))


def synthetic_study(path: Path, n_trials: int, *, multi: bool = False, seed: int = 0) -> optuna.Study:
    """``n_trials`` measured trials: the default first, then random knobs; fp32 at batch 256 runs out of
    memory, every 23rd trial crashes, every 31st is pruned, one in five has 2% noise either way."""
    info = make_info(multi)
    study = make_study(path, info)
    rng = random.Random(seed)
    trials = [measured_trial(info, result_for(DEFAULT), 20.0, 0, default=True)]
    for i in range(1, n_trials):
        params = {
            "batch_size": rng.choice(BATCHES),
            "precision": rng.choice(PRECISIONS),
            "compile_mode": rng.choice(COMPILE_MODES),
        }
        status = Status.OK
        if params["precision"] == "fp32" and params["batch_size"] == 256:
            status = Status.OOM
        elif i % 23 == 0:
            status = Status.CRASH
        elif i % 31 == 0:
            status = Status.PRUNED
        noise = 1.0 + rng.choice([0.0, 0.0, 0.0, 0.0, 0.02, -0.02])
        seconds = 40.0 if status is Status.OK else 10.0
        trials.append(measured_trial(info, result_for(params, status, noise), seconds, i))
    study.add_trials(trials)  # one call: adding 500 one by one re-reads the study each time
    return study
