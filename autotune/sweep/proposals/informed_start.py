"""The informed start: after the PyTorch default, the configuration an expert would try first on this device.

A sampler's first trials are random (TPE's first ten), and a random draw of six knobs rarely lands on the combination
that wins: a 12-trial GPT-2 sweep never tried bf16 with the fused head (BENCHMARKS.md). An engineer would have tried it
first. So once the default trial is measured, the sweep queues one configuration that an expert would pick for this
device and workload (:mod:`autotune.sweep.proposals.expert_choice`), and the next ask measures it (the study's second
trial with one worker), then its twin where there is one: the same without float8 where it trains in float8, else
without the activation checkpointing it turned on, else in the other half precision. It is a measured trial like any
other: it counts in the budget, the sampler reads it as a COMPLETE trial (TPE models it; CMA-ES, which learns only
from its own draws, does not), and it is marked ``autotune.informed`` so the progress line names it; its twin is
marked ``autotune.informed_twin``, and while their graphs compile ahead the twin may stand aside with the informed
start (:mod:`autotune.sweep.proposals.parked_trials`). Once both are measured, the batch step may follow
(:mod:`autotune.sweep.proposals.batch_step`).

What the device is (its GPU, memory, bf16; whether the model has 4-D weights, asked of the workload
built on the ``meta`` device: no memory, no weights) is asked in a trial process, as a trial would
see it: the sweep's process never touches CUDA nor runs the workload's code.

Once per study: the worker that finds the default measured takes the study's ``informed start`` lease,
decides, queues the trial (or notes why none) on the study (``autotune.informed_start``), and the
others, and a resumed sweep, find that decision there. Off with ``--no-informed-start``; not under
``--replay`` (recorded measurements have no device to ask) nor with the grid sampler (it measures
every point anyway).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import optuna
from optuna.trial import TrialState

from autotune.interrupts import StopSignals
from autotune.records import StudyRecords, TrialRecord, schema
from autotune.records.trial import is_informed
from autotune.space import Space
from autotune.sweep.context import SweepContext
from autotune.sweep.options import SweepOptions
from autotune.sweep.proposals.expert_choice import DeviceFacts, expert_params, informed_twin, likely_starts
from autotune.sweep.proposals.kernel_start import autotuned_kernel_params
from autotune.sweep.workers.leases import LeaseTable, decide_once
from autotune.trial.compilecache import study_cache_dir
from autotune.trial.probe import device_facts
from autotune.trial_process import TrialRunner

__all__ = ["InformedStart", "ProbeFailed", "last_queued", "probe_device", "queue_twin"]

LEASE = "informed start"  # the study's lease held by the worker that decides it
PROBE_TIMEOUT_S = 120.0


def queue_twin(
    study: optuna.Study, space: Space, records: StudyRecords, start: dict[str, Any], facts: DeviceFacts
) -> tuple[int, dict[str, Any]] | None:
    """Queue the informed start's twin (:func:`autotune.sweep.proposals.expert_choice.informed_twin`) to be asked
    after the informed start (Optuna serves queued trials first in, first out): its trial number and params (a queued
    trial has none of its own until it is asked), or None where it has none or the study measured it already."""
    twin = informed_twin(space, start, facts)
    if twin is None or records.measured_with(twin) is not None:
        return None
    study.enqueue_trial(space.optuna_params(twin), user_attrs={schema.ATTR_TWIN: True})
    return last_queued(study), twin


def last_queued(study: optuna.Study) -> int:
    """The number of the trial ``study.enqueue_trial`` queued last (Optuna's call returns none): the highest waiting."""
    return max(t.number for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))


class ProbeFailed(Exception):
    """The device could not be asked (the trial process failed or timed out)."""


def probe_device(space: Space, options: SweepOptions, default_params: dict[str, Any]) -> DeviceFacts:
    """Ask a trial process about the device and the workload (:func:`autotune.trial.probe.device_facts`);
    :class:`ProbeFailed` if it cannot answer."""
    layout = any(spec.name == "memory_format" and spec.kind != "fixed" for spec in space.params.values())
    float8 = "float8" in space.params and space.params["float8"].kind != "fixed"
    device = options.device or space.device
    workload = space.workload
    args = (workload.name, workload.preset, dict(workload.args), default_params, device, layout, float8)
    outcome = TrialRunner().call(device_facts, args, PROBE_TIMEOUT_S)
    if outcome.timed_out:
        raise ProbeFailed(f"no answer within {PROBE_TIMEOUT_S:g} s")
    if outcome.failure is not None:
        raise ProbeFailed(f"the process {outcome.failure}")
    return DeviceFacts(**outcome.value)


# -- once per study -----------------------------------------------------------------------------------------------


class InformedStart:
    """One worker's part in the study's informed start (see the module docstring): :meth:`queue` before each ask."""

    def __init__(
        self, ctx: SweepContext, leases: LeaseTable | None, worker: str, signals: StopSignals | None = None
    ) -> None:
        self.ctx = ctx
        self.leases = leases
        self.worker = worker
        self.signals = signals  # a stop signal ends the wait for the device's answer at once
        options, space = ctx.options, ctx.space
        self.enabled = options.informed_start and options.replay is None and space.sampler.name != "grid"
        self._settled = not self.enabled  # nothing more for this worker to do
        self._facts: DeviceFacts | None = None  # the device's answer, once asked

    def queue(self) -> None:
        """Once the default is measured: decide the informed start, unless the study holds that decision already
        or another worker is taking it now (then look again at the next ask)."""
        if self._settled:
            return
        default = self.ctx.records.default
        if default is None:
            return  # not measured yet
        self._settled = decide_once(self.leases, LEASE, self.worker, self._decided, lambda: self._decide(default))

    def likely(self, default: TrialRecord, count: int) -> list[dict[str, Any]]:
        """While ``default`` is not measured yet: the informed start's likely configurations (:func:`likely_starts`),
        for the sweep to compile ahead while the default runs. The device is asked now, once (the decision after
        the default reuses the answer). Empty where no informed start is to come, where the device cannot be asked,
        and for a space with listed kernels (their block sizes are chosen by a GPU run after the default)."""
        ctx = self.ctx
        if self._settled or ctx.space.kernels or self._decided():
            return []
        try:
            facts = self.device(default)
        except ProbeFailed:
            return []  # asked again, and said, when the default is measured
        return likely_starts(ctx.space, default, facts, count, ctx.options.memory_cap_gib)

    def device(self, default: TrialRecord) -> DeviceFacts:
        """What the device is (:func:`probe_device`), asked once; :class:`ProbeFailed` when it cannot answer."""
        if self._facts is None:
            interruptible = self.signals.interruptible if self.signals is not None else contextlib.nullcontext
            with interruptible():
                self._facts = probe_device(self.ctx.space, self.ctx.options, default.params)
        return self._facts

    def _decided(self) -> bool:
        """Whether the study holds an informed start (queued, running or measured) or a decision not to (as of a
        fresh read of its trials)."""
        self.ctx.records.refresh()
        if any(record.informed for record in self.ctx.records.trials):
            return True
        return schema.STUDY_ATTR_INFORMED in self.ctx.study.user_attrs

    def _decide(self, default: TrialRecord) -> None:
        ctx = self.ctx
        interruptible = self.signals.interruptible if self.signals is not None else contextlib.nullcontext
        try:
            facts = self.device(default)
        except ProbeFailed as exc:
            self._none(f"the device could not be asked: {exc}")
            return
        expert = expert_params(ctx.space, default, facts, ctx.options.memory_cap_gib, tuple(ctx.records.measured))
        on = f"on {facts.describe()}"
        if not expert.changes:
            self._none(f"{on}, the default configuration is what an expert would try in this space")
            return
        prepared: dict[str, float] = {}
        # their block sizes as their own autotuners choose them (autotune.sweep.proposals.kernel_start)
        if ctx.space.kernels:
            began = time.monotonic()
            with interruptible():
                values, note = autotuned_kernel_params(
                    ctx.space, expert.params, ctx.options.device or ctx.space.device,
                    str(study_cache_dir(ctx.options.storage, ctx.study.study_name)), ctx.options.memory_cap_gib,
                )  # fmt: skip
            expert = expert.with_values(values, default, note)
            prepared = {schema.ATTR_PREPARED_S: time.monotonic() - began}  # device time: the trial's, in its figures
        earlier = ctx.records.measured_with(expert.params)
        if earlier is not None:
            self._none(f"{on}, trial {earlier.number} has its choice already: {expert.describe()}")
            return
        feasible, rule = ctx.space.is_feasible(expert.params)
        if not feasible:
            self._none(f"{on}, its choice breaks the rule {rule}: {expert.describe()}")
            return
        attrs = {schema.ATTR_INFORMED: True, **prepared}
        ctx.study.enqueue_trial(ctx.space.optuna_params(expert.params), user_attrs=attrs)
        number = self._queued_number()
        twin = queue_twin(ctx.study, ctx.space, ctx.records, expert.params, facts)  # asked next, FIFO
        why = f"{on}: {expert.describe()}"
        if facts.layout_error:
            why += f" (memory_format kept: the workload could not be built on the meta device: {facts.layout_error})"
        decision = {"trial": number, "params": expert.params, "why": why}
        ctx.study.set_user_attr(schema.STUDY_ATTR_INFORMED, {**decision, **({"twin": twin[0]} if twin else {})})
        ctx.records.refresh()
        ctx.progress.message(f"informed start: trial {number} measures what an expert would try first {why}")
        if twin is not None:
            ctx.progress.message(f"informed start: then trial {twin[0]} measures {_twin_text(expert.params, twin[1])}")

    def _queued_number(self) -> int | None:
        waiting = self.ctx.study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
        queued = [t.number for t in waiting if is_informed(t)]
        return queued[-1] if queued else None

    def _none(self, reason: str) -> None:
        self.ctx.study.set_user_attr(schema.STUDY_ATTR_INFORMED, {"none": reason})
        self.ctx.progress.message(f"informed start: none queued: {reason}")


def _twin_text(start: dict[str, Any], twin: dict[str, Any]) -> str:
    """What the twin changes, for its progress line."""
    if twin.get("precision") != start.get("precision"):
        return f"the same in {twin['precision']} (which half precision wins is the model's to say)"
    mode = twin.get("activation_checkpointing", "none")
    if mode != start.get("activation_checkpointing", "none"):
        if mode == "none":
            return "the same without activation checkpointing (whether it needs the recompute is its peak's to say)"
        return (
            f"the same with activation_checkpointing={mode} (the two peaks say what it saves; the batch step takes "
            "each as far as its own allows)"
        )
    return "the same without float8 (whether FP8 pays is the model's layer shapes to say)"
