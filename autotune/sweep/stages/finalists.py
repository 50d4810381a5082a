"""Finishing stage: the search's best configurations re-tried with Inductor's expensive options.

Options such as ``coordinate_descent_tuning`` and the max-autotune modes cost minutes of compile a
trial (on an H200, +4.2% for 122 s and +3.7% for 240 s on a vision transformer's winner): too dear
to search, worth paying once on the few configurations that can win. A space's ``finalists:``
section names them and how many configurations get them (``top``); after the search and its
re-measurements, each of those configurations runs once more with the options (the ``inductor``
knob, and ``compile_mode`` when the section gives one) as a new measured trial of the same study.
It ranks in the leaderboard like any trial, and exports like any trial: the knob goes to
``torch.compile`` in production as it did in the trial.

Limits: the stage runs at most ``top`` trials, each within the space's ``trial_timeout``. Under a time
limit it starts a finalist only when the finalist, and its re-measurement, are expected to end before
the limit (:mod:`autotune.sweep.stages.time_limit`, which also has the search leave the finishing stages their
time); one that is not expected to is not started, with one line saying why. They are measured trials
of the study: a resumed sweep counts them in its budget and does not run them again, nor one another
worker already ran or runs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.interrupts import Interrupted
from autotune.numbers import duration, number
from autotune.records import TrialKind, TrialRecord, schema
from autotune.space.settings import FinalistsSpec
from autotune.storage.rdb import heartbeat, quiet_optuna, worker_id
from autotune.sweep.context import SweepContext
from autotune.sweep.proposals.proposer import Proposal
from autotune.sweep.recorder import Recorder
from autotune.sweep.stages.time_limit import finalist_estimate, finalist_sources
from autotune.sweep.workers.interrupted_trials import record_interrupted

__all__ = ["Finalists"]


class Finalists:
    """Re-tries the ``spec.top`` best configurations of the search with the spec's knob overrides."""

    name = "finalists"

    def __init__(self, spec: FinalistsSpec, deadline: float | None = None) -> None:
        self.spec = spec
        self.deadline = deadline  # the sweep's time limit (time.time()); None: none
        self.overrides = spec.knob_overrides()

    def run(self, ctx: SweepContext) -> None:
        ctx.records.refresh()
        sources = finalist_sources(ctx.records, self.spec)
        if not sources:
            ctx.progress.message(f"finalists: none started: {self._no_source(ctx.records.ranked)}")
            return
        for source in sources:
            params = {**source.params, **self.overrides}
            if ctx.records.measured_with(params) is not None:
                continue  # tried already: by an earlier run of this sweep, or by another worker (now or before)
            if self.deadline is not None and time.time() >= self.deadline:
                ctx.progress.message("finalists: the sweep's time limit has passed; no finalist started")
                return
            if self._fits(ctx, source):
                self._try(ctx, source, params)

    def _no_source(self, ranked: Sequence[TrialRecord]) -> str:
        """Why no ranked trial is a finalist's source, in words."""
        searched = [record for record in ranked if record.finalist_of is None]
        compiled = [record for record in searched if record.params.get("compile_mode", "none") != "none"]
        if not searched:
            return "no trial of the search ranks"
        if "compile_mode" not in self.overrides and not compiled:
            return f"no ranked trial compiles, and {_describe(self.overrides)} changes only compiled ones"
        return f"every ranked trial it could re-try has {_describe(self.overrides)} already"

    def _fits(self, ctx: SweepContext, source: TrialRecord) -> bool:
        """Whether ``source``'s finalist (and its re-measurement) is expected to end before the time limit; if not,
        say so."""
        if self.deadline is None:
            return True
        runs = ctx.options.remeasure_repeats if ctx.options.remeasure_top else 0
        need = finalist_estimate(source, self.spec, ctx.records, runs)
        left = self.deadline - time.time()
        if need.seconds <= left:
            return True
        ctx.progress.message(
            f"finalists: trial {source.number} again with {_describe(self.overrides)} not started: it needs about "
            f"{duration(need.seconds)} ({need.why}), {duration(left)} left of the sweep's time limit"
        )
        return False

    def _try(self, ctx: SweepContext, source: TrialRecord, params: dict[str, Any]) -> None:
        trial = _new_trial(ctx, source, params)
        ctx.progress.message(
            f"finalist trial {trial.number}: trial {source.number} again with {_describe(self.overrides)}"
        )
        try:
            with heartbeat(ctx.storage, trial._trial_id):
                result = ctx.executor(params, ctx.space.budget.trial_timeout_s, None)
        except Interrupted as stop:
            # Not measured, so the stage of the resumed sweep tries this finalist again.
            record_interrupted(ctx.study, trial, stop.signame, queue_again=False)
            ctx.progress.message(f"finalist trial {trial.number} interrupted by {stop.signame}: it runs on resume")
            raise
        except BaseException:
            with quiet_optuna():
                ctx.study.tell(trial, state=TrialState.FAIL)  # a bug: leave nothing RUNNING
            raise
        recorder = Recorder(ctx.study, ctx.space, ctx.info.objectives, ctx.records, ctx.tracker)
        recorder.record(Proposal(trial, params, TrialKind.MEASURED), result)
        ctx.records.refresh()
        finalist = ctx.records.trial(trial.number)
        ctx.progress.message(f"finalist trial {trial.number}: {_outcome(finalist, ctx.info.objectives[0], source)}")


def _new_trial(ctx: SweepContext, source: TrialRecord, params: dict[str, Any]) -> optuna.Trial:
    """A RUNNING trial of the study with ``source``'s sampler params (samplers see a point of the space) and
    ``params`` as the configuration it runs.

    Created from a template rather than by ``study.ask()``, which would pop a queued trial (a
    grid's leftover point, a retried orphan) in its place.
    """
    searched = ctx.study.get_trials(deepcopy=False)[source.number]  # numbered 0..n-1: a number is an index
    template = FrozenTrial(
        number=-1,  # the storage numbers it
        state=TrialState.RUNNING,
        value=None,
        datetime_start=datetime.now(),
        datetime_complete=None,
        params=dict(searched.params),
        distributions=dict(searched.distributions),
        user_attrs={
            schema.ATTR_PARAMS: params,
            schema.ATTR_WORKER: worker_id(),
            schema.ATTR_FINALIST_OF: source.number,
        },
        system_attrs={},
        intermediate_values={},
        trial_id=-1,
    )
    study_id = ctx.storage.get_study_id_from_name(ctx.study.study_name)
    return optuna.Trial(ctx.study, ctx.storage.create_new_trial(study_id, template))


def _describe(overrides: dict[str, Any]) -> str:
    """``compile_mode=max-autotune, inductor coordinate_descent_tuning=true``."""
    return ", ".join(
        f"{name} {value}" if name == "inductor" else f"{name}={value}" for name, value in overrides.items()
    )


def _outcome(finalist: TrialRecord, objective: tuple[str, str], source: TrialRecord) -> str:
    """``ok throughput 6,094 images/s (1.039x its search trial)``, or how it failed."""
    if not finalist.ok:
        return f"{finalist.outcome}: {finalist.reason}"
    metric, direction = objective
    value = finalist.value
    if value is None:
        return finalist.outcome
    unit = f" {finalist.metrics.get('throughput_unit', '')}" if metric == "throughput" else ""
    text = f"{finalist.outcome} {metric} {number(value)}{unit}"
    if source.value:
        ratio = value / source.value if direction == "maximize" else source.value / value
        text += f" ({ratio:.3f}x its search trial, {source.value_is})"
    return text
