"""What autotune keeps on Optuna trials and studies: the attribute names, the trial kinds, the study's info.

The Optuna storage is the truth. Writers (the sweep's recorder and finishing stages) take the names
from here; only :mod:`autotune.records` reads them back, so a view never parses a trial itself. A
trial's outcome is its TrialResult (without per-step series) in ``autotune.result``;
``autotune.kind`` says whether it was measured, rejected before running, a duplicate answered from
an earlier measurement, or surplus to a budget other workers filled (only measured trials cost GPU
time and count in the budget).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import TrialState

if TYPE_CHECKING:
    from autotune.space import Space

__all__ = [
    "ATTR_DEFAULT",
    "ATTR_DUPLICATE_OF",
    "ATTR_FINALIST_OF",
    "ATTR_GPU",
    "ATTR_INFORMED",
    "ATTR_INPUT_BOUND",
    "ATTR_KIND",
    "ATTR_MLFLOW_RUN",
    "ATTR_PARAMS",
    "ATTR_PARKED_S",
    "ATTR_PREPARED_S",
    "ATTR_REASON",
    "ATTR_RESULT",
    "ATTR_STATUS",
    "ATTR_VIOLATION",
    "ATTR_WORKER",
    "FINISHED_STATES",
    "INTERRUPTED",
    "STUDY_ATTR_BATCH_STEP",
    "STUDY_ATTR_BUDGET",
    "STUDY_ATTR_FINISHED",
    "STUDY_ATTR_INFO",
    "STUDY_ATTR_INFORMED",
    "STUDY_ATTR_PROFILED",
    "STUDY_ATTR_WARM_START",
    "STUDY_ATTR_WINNER",
    "StudyInfo",
    "TrialKind",
    "load_study_info",
    "rehearsed_key",
    "rehearsed_number",
    "remeasured_key",
]

# --- on trials ---------------------------------------------------------------------------------
ATTR_RESULT = "autotune.result"  # the TrialResult as a dict, per-step series left out
ATTR_PARAMS = "autotune.params"  # the params as the space decoded them (ordinals as values, fixed included)
ATTR_KIND = "autotune.kind"  # a TrialKind
ATTR_STATUS = "autotune.views.status"  # the result's status, or "interrupted"
ATTR_REASON = "autotune.reason"
ATTR_DEFAULT = "autotune.default"  # the PyTorch-default configuration, enqueued first: the yardstick of speedup
# The informed start (autotune.sweep.proposals.informed_start): what an expert would try first on this device, queued
# once the default is measured.
ATTR_INFORMED = "autotune.informed"
# Its twin (autotune.sweep.proposals.expert_choice.informed_twin: without float8, with checkpointing switched the other
# way under a peak-memory constraint, or in the other half precision), queued right after it.
ATTR_TWIN = "autotune.informed_twin"
# Seconds of device time spent preparing a trial before it started (the informed start's run of the listed kernels'
# own autotuners, autotune.sweep.proposals.kernel_start): counted in the trial's duration, so GPU-time figures
# include it.
ATTR_PREPARED_S = "autotune.prepared_s"
# Seconds a trial stood aside (RUNNING, not measured) while other trials used the device
# (autotune.sweep.proposals.parked_trials): parked while its graph compiled ahead, or asked while parked trials waited
# and measured after them. Its record starts when it was taken up, so its duration is its measurement's.
ATTR_PARKED_S = "autotune.parked_s"
ATTR_WORKER = "autotune.worker"  # host:pid of the worker running the trial
ATTR_GPU = "autotune.gpu"  # the GPU a worker pinned its trial to, where the sweep records one
ATTR_VIOLATION = "autotune.violation"  # > 0: infeasible (OOM, rejected, a metric constraint broken)
ATTR_DUPLICATE_OF = "autotune.duplicate_of"  # the trial a duplicate was answered from
ATTR_FINALIST_OF = "autotune.finalist_of"  # the search trial whose configuration a finalist re-tries
ATTR_MLFLOW_RUN = "autotune.mlflow_run_id"
ATTR_INPUT_BOUND = "autotune.input_bound"  # True: an ok trial that waited for input > 10% of its step time
INTERRUPTED = "interrupted"  # the autotune.views.status of a trial stopped by a signal (not a trial outcome)

# --- on the study ------------------------------------------------------------------------------
STUDY_ATTR_INFO = "autotune.info"  # a StudyInfo as a dict
# {"study": name, "trials": n, "skipped": m}: the study whose trials the sampler started from (--warm-start).
STUDY_ATTR_WARM_START = "autotune.warm_start"
# The informed start's decision, taken once per study: {"trial": n, "params": {...}, "why": "...", "twin": m} when it
# was queued ("twin": the trial of its twin, queued after it, where there is one),
# {"none": reason} when nothing was (the default's configuration already, measured already, ...).
STUDY_ATTR_INFORMED = "autotune.informed_start"
# The batch step's decision, taken once per study after the informed start and its twin are measured
# (autotune.sweep.proposals.batch_step): {"steps": [{"trial": n, "source": m, "params": {...}, "why": "..."}, ...]}
# when trial m's configuration was queued again at a larger batch as trial n (one or two steps), {"none": reason}
# when nothing was.
STUDY_ATTR_BATCH_STEP = "autotune.batch_step"
# {"default": n, "winner": m}: the trials the last finished profile compared.
STUDY_ATTR_PROFILED = "autotune.profiled"
# {"measured": n, "by": "host:pid"}: the last finishing stages that completed began over n measured trials of the
# search (the budget's count: finalists left out).
STUDY_ATTR_FINISHED = "autotune.finished"
# {"trials": n or None, "timeout_s": s or None}: the budget the last sweep of the study ran with, the command's
# --n-trials and --timeout over the space's, capped by what the space can measure (autotune.sweep.loop).
STUDY_ATTR_BUDGET = "autotune.budget"
# The record model's winner as the sweep ended, for readers of the study outside autotune (optuna-dashboard):
# {"trial", "metric", "value", "value_is", "first_value", "speedup", "default_trial"}.
STUDY_ATTR_WINNER = "autotune.winner"
# "autotune.remeasured:<trial number>" -> {"metric", "values", "median", "cv", "seconds", "metrics"}: the
# objective (and every numeric metric) measured again in fresh processes. On the study, because a finished
# trial's attributes are immutable.
_REMEASURED_PREFIX = "autotune.remeasured:"
ATTR_REMEASURED = "autotune.remeasured"  # the same, on the trial itself (studies written before the prefix)
# "autotune.rehearsed:<trial number>" -> a Rehearsal as a dict (autotune.records.rehearsed_start): the trial's
# production start run once in a fresh process with empty compile caches and its compile artifacts loaded, and what
# that start saved (autotune.sweep.stages.rehearsal). On the study, as re-measurements are.
_REHEARSED_PREFIX = "autotune.rehearsed:"

# States of trials that have an outcome (pruned ones too: they were measured until the warm-up).
FINISHED_STATES = (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)


def remeasured_key(number: int) -> str:
    """The study attribute holding trial ``number``'s re-measurement."""
    return f"{_REMEASURED_PREFIX}{number}"


def remeasured_number(key: str) -> int | None:
    """The trial number of a re-measurement's study attribute, or None for any other attribute."""
    rest = key.removeprefix(_REMEASURED_PREFIX)
    return int(rest) if rest != key and rest.isdigit() else None


def rehearsed_key(number: int) -> str:
    """The study attribute holding the rehearsal of trial ``number``'s production start."""
    return f"{_REHEARSED_PREFIX}{number}"


def rehearsed_number(key: str) -> int | None:
    """The trial number of a rehearsal's study attribute, or None for any other attribute."""
    rest = key.removeprefix(_REHEARSED_PREFIX)
    return int(rest) if rest != key and rest.isdigit() else None


class TrialKind(StrEnum):
    """Where a finished trial's outcome came from."""

    MEASURED = "measured"
    REJECTED = "rejected"  # a feasibility rule ruled it out before it ran
    DUPLICATE = "duplicate"  # the same params were measured before: answered from that trial
    SURPLUS = "surplus"  # proposed while other workers' running trials already filled the budget: not run


@dataclass(frozen=True)
class StudyInfo:
    """What a study was created for, stored on the study so the views need no YAML."""

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
        # Imported here: validating a space imports the workloads (and torch); only a caller that rebuilds the
        # study's space pays for that, not every reader of its records.
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
    """The study's :class:`StudyInfo`, or None for a study autotune did not make."""
    data = study.user_attrs.get(STUDY_ATTR_INFO)
    return StudyInfo.from_dict(data) if data else None
