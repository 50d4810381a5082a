"""How autotune keeps its records on Optuna trials and studies: the storage is the truth.

Every worker, the leaderboard and export read the same attributes, so this module is the one
place that names them. A trial's outcome is its TrialResult (without per-step series) in
``autotune.result``; ``autotune.kind`` says whether it was measured, rejected before running,
or a duplicate answered from an earlier measurement (neither costs GPU time nor counts in the
budget).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.errors import AutotuneError, first_line
from autotune.results import Status, TrialResult
from autotune.storagefaults import fault_error

if TYPE_CHECKING:
    from autotune.space import Space

__all__ = [
    "DEFAULT_STORAGE",
    "FINISHED_STATES",
    "StudyInfo",
    "Tally",
    "TrialKind",
    "feasible_value",
    "load_existing_study",
    "load_study_info",
    "measured_trials",
    "redact_url",
    "remeasured",
    "storage_error",
    "store_remeasured",
    "tally",
    "trial_kind",
    "trial_params",
    "trial_result",
]

ATTR_RESULT = "autotune.result"
ATTR_PARAMS = "autotune.params"  # the params as the space decoded them (ordinals as values, fixed included)
ATTR_KIND = "autotune.kind"
ATTR_STATUS = "autotune.status"
ATTR_REASON = "autotune.reason"
ATTR_DEFAULT = "autotune.default"  # the PyTorch-default configuration, enqueued first
ATTR_WORKER = "autotune.worker"  # host:pid of the worker running the trial
ATTR_VIOLATION = "autotune.violation"  # > 0: infeasible (OOM, rejected, a metric constraint broken)
ATTR_DUPLICATE_OF = "autotune.duplicate_of"
ATTR_MLFLOW_RUN = "autotune.mlflow_run_id"
ATTR_INPUT_BOUND = "autotune.input_bound"  # True: an ok trial that waited for input > 10% of its step time
# {"metric": m, "values": [...], "median": x, "cv": y}: the objective measured again in fresh processes.
# Kept on the study as "autotune.remeasured:<trial number>": a finished trial's attributes are immutable.
ATTR_REMEASURED = "autotune.remeasured"
STUDY_ATTR_INFO = "autotune.info"
# {"study": name, "trials": n, "skipped": m}: the study whose trials the sampler started from (--warm-start).
STUDY_ATTR_WARM_START = "autotune.warm_start"
# States of trials that have an outcome (pruned ones too: they were measured until the warm-up).
FINISHED_STATES = (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)
DEFAULT_STORAGE = "sqlite:///autotune.db"  # in the current folder: the embedded default


class TrialKind(StrEnum):
    """Where a trial's outcome came from."""

    MEASURED = "measured"
    REJECTED = "rejected"  # a feasibility rule ruled it out before it ran
    DUPLICATE = "duplicate"  # the same params were measured before: answered from that trial
    SURPLUS = "surplus"  # proposed while other workers' running trials already filled the budget: not run


@dataclass(frozen=True)
class StudyInfo:
    """What a study was created for, stored on the study so leaderboard and export need no YAML."""

    workload: str
    preset: str
    device: str
    space_path: str
    space_text: str
    objectives: tuple[tuple[str, str], ...]  # (metric, direction)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "preset": self.preset,
            "device": self.device,
            "space_path": self.space_path,
            "space_text": self.space_text,
            "objectives": [list(o) for o in self.objectives],
        }

    def space(self) -> Space:
        """The study's space from the text stored on it: the file may have changed or moved since the sweep."""
        import tempfile
        from pathlib import Path

        from autotune.space import load_space

        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / (Path(self.space_path).name or "space.yaml")
            path.write_text(self.space_text, encoding="utf-8")
            return load_space(path)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StudyInfo:
        return cls(
            workload=data["workload"],
            preset=data["preset"],
            device=data["device"],
            space_path=data["space_path"],
            space_text=data["space_text"],
            objectives=tuple((m, d) for m, d in data["objectives"]),
        )


def load_study_info(study: optuna.Study) -> StudyInfo | None:
    data = study.user_attrs.get(STUDY_ATTR_INFO)
    return StudyInfo.from_dict(data) if data else None


def trial_result(trial: FrozenTrial) -> TrialResult | None:
    """The recorded outcome of a finished trial, or None (running, or killed before reporting)."""
    data = trial.user_attrs.get(ATTR_RESULT)
    return TrialResult.from_dict(data) if data else None


def feasible_value(trial: FrozenTrial, metric: str) -> float | None:
    """``metric`` of an ok trial that broke no constraint; None for anything else."""
    result = trial_result(trial)
    if result is None or not result.ok or trial.user_attrs.get(ATTR_VIOLATION, 0.0) > 0:
        return None
    value = result.metrics.get(metric)
    return float(value) if isinstance(value, int | float) else None


def trial_params(trial: FrozenTrial) -> dict[str, Any]:
    """The trial's params as the space decoded them."""
    return dict(trial.user_attrs.get(ATTR_PARAMS, trial.params))


def trial_kind(trial: FrozenTrial) -> TrialKind | None:
    kind = trial.user_attrs.get(ATTR_KIND)
    return TrialKind(kind) if kind else None


def measured_trials(study: optuna.Study) -> list[FrozenTrial]:
    """Finished trials whose outcome was measured (or replayed): what the budget counts."""
    return [
        t
        for t in study.get_trials(deepcopy=False, states=FINISHED_STATES)
        if trial_kind(t) is TrialKind.MEASURED and ATTR_RESULT in t.user_attrs
    ]


@dataclass(frozen=True)
class Tally:
    """How the measured trials ended: ok, pruned (stopped after warm-up, slow) or failed (oom, crash, ...)."""

    measured: int
    pruned: int
    failed: int

    @property
    def ok(self) -> int:
        return self.measured - self.pruned - self.failed


def tally(measured: list[FrozenTrial]) -> Tally:
    """Count the outcomes of ``measured`` (from :func:`measured_trials`); a pruned trial is not a failure."""
    statuses = [t.user_attrs.get(ATTR_STATUS) for t in measured]
    pruned = statuses.count(Status.PRUNED.value)
    failed = len(statuses) - pruned - statuses.count(Status.OK.value)
    return Tally(len(measured), pruned, failed)


def load_existing_study(name: str, storage: str) -> optuna.Study:
    """An existing study, or an :class:`AutotuneError` that lists the studies the storage has."""
    try:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
    except Exception as exc:  # a bad URL, an unreachable database
        raise storage_error(storage, exc) from exc
    if name not in names:
        known = ", ".join(sorted(names)) or "none"
        raise AutotuneError(f"no study {name!r} in {redact_url(storage)} (studies there: {known})")
    return optuna.load_study(study_name=name, storage=storage)


def remeasured(
    study: optuna.Study, trial: FrozenTrial, study_attrs: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """The re-measurement of a trial's objective in fresh processes, if the sweep made one.

    ``study_attrs`` is ``study.user_attrs`` read once by a caller that looks up many trials: each
    read is a query to the storage.
    """
    attrs = study.user_attrs if study_attrs is None else study_attrs
    data = attrs.get(f"{ATTR_REMEASURED}:{trial.number}") or trial.user_attrs.get(ATTR_REMEASURED)
    return dict(data) if data else None


def store_remeasured(study: optuna.Study, number: int, data: dict[str, Any]) -> None:
    study.set_user_attr(f"{ATTR_REMEASURED}:{number}", data)


def storage_error(url: str, exc: BaseException) -> AutotuneError:
    """The one-line error for a storage that cannot be opened, without its password."""
    if (named := fault_error(url, exc)) is not None:  # a full disk, a corrupt or read-only file: said as such
        return named
    return AutotuneError(f"cannot open storage {redact_url(url)!r}: {type(exc).__name__}: {first_line(exc)}")


def redact_url(url: str) -> str:
    """``url`` without a password (``postgresql://user:secret@host/db`` -> ``postgresql://user@host/db``)."""
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    netloc = f"{userinfo.split(':', 1)[0]}@{hostport}" if at else parts.netloc
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k.lower() != "password"])
    if netloc == parts.netloc and query == urlencode(parse_qsl(parts.query)):
        return url  # nothing to hide: keep the text exactly as given (sqlite:///autotune.db)
    return urlunsplit(parts._replace(netloc=netloc, query=query))
