"""One trial's turn: ask, propose, then measure it now or park it while its graph compiles; record; the progress line.

:class:`~autotune.sweep.loop.Sweep` decides when a turn comes (the stop reasons, other workers' trials); a turn
decides what happens to one trial. The proposer asks and decides how the proposal is answered
(:mod:`autotune.sweep.proposals.proposer`). A proposal that must run is measured by the executor, unless its graph would
be compiled in its trial, or waited for, while a compile ahead can take it: then it is parked
(:mod:`autotune.sweep.proposals.parked_trials`) and measured in a later turn; one predicted to outlast the parked
informed start's compile waits for it to be measured first; one that cannot park has its compile started ahead where the
parked trials would be ready sooner, and they are measured first. Before a measurement the compile ahead is kept going
(:mod:`autotune.sweep.proposals.compile_ahead`); a trial that ran out of memory while compiles ahead ran beside it is
measured once more, alone (:func:`~autotune.sweep.proposals.compile_ahead.measure_alone`), and only that measurement
is its outcome. The recorder writes the outcome to the study and MLflow.

A stop signal while the trial process runs kills it and records the trial as interrupted, its configuration queued
to run first when the sweep resumes (:mod:`autotune.sweep.workers.interrupted_trials`); any other exception fails it.
Either way no trial is left RUNNING, the parked ones included (:meth:`TrialTurns.release_parked`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from optuna.trial import Trial, TrialState

from autotune.interrupts import Interrupted, StopSignals
from autotune.labels import trial_run_name
from autotune.measurement import TrialResult
from autotune.numbers import quantity
from autotune.records import TrialKind, TrialRecord
from autotune.search.costmodel import graph_key
from autotune.storage.rdb import heartbeat, quiet_optuna
from autotune.sweep.context import SweepContext
from autotune.sweep.faults.full_disk import GuardedRecorder
from autotune.sweep.proposals.compile_ahead import CompileAhead, measure_alone
from autotune.sweep.proposals.compile_pruning import pruning_for
from autotune.sweep.proposals.informed_start import InformedStart
from autotune.sweep.proposals.parked_trials import Parked, Parking, Predict, taken_up
from autotune.sweep.proposals.proposer import Proposal, Proposer
from autotune.sweep.workers.device_gate import DeviceGate
from autotune.sweep.workers.interrupted_trials import record_interrupted
from autotune.views.progress import winner_text

__all__ = ["TrialTurns"]


class TrialTurns:
    """The turns of one worker's trials: each asked, proposed, measured or parked, and recorded."""

    def __init__(
        self,
        ctx: SweepContext,
        proposer: Proposer,
        recorder: GuardedRecorder,
        signals: StopSignals,
        device: DeviceGate,
        informed: InformedStart,
        ahead: CompileAhead | None,
        predict: Predict,
    ) -> None:
        self.ctx = ctx
        self.proposer = proposer
        self.recorder = recorder
        self.signals = signals
        self.device = device
        self.informed = informed
        self.ahead = ahead  # None: this worker compiles nothing ahead (and parks nothing)
        self.parking = Parking(ahead, ctx.study, ctx.storage, ctx.progress, predict) if ahead is not None else None

    def take(self) -> bool:
        """Ask, propose, then measure or park, and record. True when the trial was measured or parked (it counts
        in the budget), False when it needed no run (a repeat, a rejected configuration)."""
        with self.signals.deferred():
            trial = self.proposer.ask()
            started = time.monotonic()
            chosen = False  # a configuration to measure was chosen: an interrupted trial queues it again
            with self._settled(trial, lambda: chosen):
                proposal = self.proposer.propose(trial)
                chosen = proposal.kind is TrialKind.MEASURED
                record = self.ctx.records.trial(trial.number)
                label = _label(trial.number, proposal.params, record)
                if chosen and self.parking is not None:
                    compiled = self._compiled()
                    if self.parking.park(proposal, label, compiled, record.informed, record.twin):
                        return True  # measured in a later turn (take_parked)
                    if self.parking.outlasts(proposal):
                        self._parked_first(proposal.trial)
                        started = time.monotonic()  # its turn begins after theirs
                    else:
                        self.parking.compile_beside(proposal, compiled)
                        if self._sooner_first(proposal):
                            started = time.monotonic()
                result = self._answer(proposal, label)
            self._record(label, proposal, result, started)
            return proposal.kind is TrialKind.MEASURED

    def take_parked(self, urgent: bool) -> bool:
        """Measure the first parked trial whose graph's compile ahead has ended; with ``urgent`` (the budget's last
        trials are parked, or the last proposal needed no run: the sampler circles) one now, if none has ended the one
        predicted to end first (:meth:`Parking.take`), waiting for the rest of its compile. True when one was measured.
        """
        parked = self.parking.take(waiting=urgent) if self.parking is not None else None
        if parked is None:
            return False
        self._measure_parked(parked)
        return True

    def _parked_first(self, trial: Trial) -> None:
        """Measure the parked trials before ``trial``, which would outlast the informed start's compile: it waits,
        and its record starts after them (schema.ATTR_PARKED_S), so no GPU second is counted twice."""
        while self.take_parked(urgent=True):
            pass
        taken_up(trial)

    def _sooner_first(self, proposal: Proposal) -> bool:
        """Measure the parked trials whose compiles ahead are predicted to end before that of ``proposal``'s graph,
        which it would wait for (:meth:`Parking.sooner`); True when one was, ``proposal``'s record then starts after
        them (schema.ATTR_PARKED_S)."""
        measured = False
        while self.parking is not None and (parked := self.parking.sooner(proposal)) is not None:
            self._measure_parked(parked)
            measured = True
        if measured:
            taken_up(proposal.trial)
        return measured

    def end_parked(self, measure: bool) -> None:
        """The search stops: measure the parked trials (``measure``), or record them as interrupted, queued again."""
        while measure and self.take_parked(urgent=True):
            pass
        self.release_parked("the end of the search (its device was taken out)")

    def release_parked(self, cause: str) -> None:
        """Record the parked trials as interrupted by ``cause``, queued again (a resumed sweep measures them first)."""
        if self.parking is not None and self.parking.parked:
            numbers = [str(parked.proposal.trial.number) for parked in self.parking.parked]
            trials = f"trial{'s' if len(numbers) > 1 else ''} {', '.join(numbers)}"
            self.ctx.progress.message(f"parked {trials} not measured: queued for a resumed sweep")
            self.parking.release(cause)

    def _measure_parked(self, parked: Parked) -> None:
        with self.signals.deferred():
            started = time.monotonic()
            with self._settled(parked.proposal.trial, lambda: True):
                result = self._answer(parked.proposal, parked.label)
            self._record(parked.label, parked.proposal, result, started)

    @contextlib.contextmanager
    def _settled(self, trial: Trial, chosen: Callable[[], bool]) -> Iterator[None]:
        """The trial's heartbeat while it runs; a stop signal records it as interrupted (queued again if ``chosen()``),
        any other exception as failed (bad input or a bug): nothing left RUNNING."""
        ctx = self.ctx
        try:
            with heartbeat(ctx.storage, trial._trial_id):
                yield
        except Interrupted as stop:
            record_interrupted(ctx.study, trial, stop.signame, queue_again=chosen())
            again = ": not counted, it runs again when the sweep resumes" if chosen() else ""
            ctx.progress.message(f"trial {trial.number} interrupted by {stop.signame}{again}")
            raise
        except BaseException:
            with quiet_optuna():
                ctx.study.tell(trial, state=TrialState.FAIL)
            raise

    def _answer(self, proposal: Proposal, label: str) -> TrialResult:
        """The proposal's outcome: its answer where it needs no run, else its measurement."""
        self.ctx.progress.started(label)
        if proposal.answer is not None:
            return proposal.answer
        waited = self._before_measuring(proposal)
        beside = self.ahead.running() if self.ahead is not None else 0
        result = self._measure(proposal)
        if self.ahead is not None:
            if measure_alone(result, beside):
                result = self._measure_alone(proposal, beside)
            self.ahead.account(proposal.params, result, waited)
        return result

    def _measure_alone(self, proposal: Proposal, beside: int) -> TrialResult:
        """Measure ``proposal`` again with no compile ahead beside it: its first measurement ran out of memory while
        ``beside`` compiles ahead held some, which says nothing of its configuration."""
        assert self.ahead is not None
        compiles = f"{beside} compile{'s' if beside > 1 else ''} ahead"
        number = proposal.trial.number
        self.ctx.progress.message(
            f"trial {number} ran out of memory while {compiles} held GPU memory: measuring it again alone"
        )
        with self.signals.interruptible():  # waiting for a parked trial's compile: a stop signal ends it at once
            self.ahead.make_way()
        return self._measure(proposal)

    def _before_measuring(self, proposal: Proposal) -> float:
        """Keep the compile ahead going (:mod:`autotune.sweep.proposals.compile_ahead`); the seconds this trial waited
        for its own."""
        if self.ahead is None:
            return 0.0
        record = self.ctx.records.trial(proposal.trial.number)
        if record.default:  # nothing is scored yet, and the informed start comes next: its likely graphs
            likely = self.informed.likely(record, self.ahead.slots)
            self.ahead.speculate(likely, "while the default trial runs, the informed start's likely graph")
        with self.signals.interruptible():  # waiting for a compile: a stop signal ends it at once
            return self.ahead.before(proposal.params, self._compiled())

    def _compiled(self) -> set[str]:
        """The graph keys that measured trials compiled (in the study's compile cache)."""
        return {key for r in self.ctx.records.measured if r.compile_s > 0 and (key := graph_key(r.params))}

    def _measure(self, proposal: Proposal) -> TrialResult:
        with self.signals.interruptible():  # the wait for the trial process: a stop signal ends it at once
            result = self.ctx.executor(
                proposal.params, self.ctx.space.budget.trial_timeout_s, pruning_for(self.ctx, proposal.params)
            )
        self.device.used()
        return result

    def _record(self, label: str, proposal: Proposal, result: TrialResult, started: float) -> None:
        records = self.ctx.records
        self.recorder.record(proposal, result)
        records.refresh()
        measured = proposal.kind is TrialKind.MEASURED
        outcome = _outcome(proposal, records.trial(proposal.trial.number), result, records.metric)
        seconds = time.monotonic() - started
        self.ctx.progress.finished(label, outcome, seconds, measured, records.tally(), winner_text(records))


def _label(number: int, params: dict[str, object], record: TrialRecord) -> str:
    label = trial_run_name(number, params)
    return f"informed start: {label}" if record.informed else label


def _outcome(proposal: Proposal, record: TrialRecord, result: TrialResult, metric: str) -> str:
    """What the progress line says of a finished proposal: its outcome as the records name it."""
    if proposal.kind is TrialKind.DUPLICATE:
        source = proposal.source
        return f"same as trial {source.number}, not run again" if source else str(result.reason)
    if proposal.kind in (TrialKind.REJECTED, TrialKind.SURPLUS):
        return str(result.reason)
    if not record.ok:
        return f"{record.outcome}: {record.reason}"
    unit = record.metrics.get("throughput_unit", "") if metric == "throughput" else ""
    value = record.value if record.value is not None else float("nan")
    outcome = f"{record.outcome} {metric} {quantity(value, unit)}"
    if record.outcome == "infeasible":
        outcome += f" (broke a constraint: {record.reason})" if record.reason else " (broke a constraint)"
    if record.metrics.get("gpu_other_processes"):
        outcome += " (WARNING: other processes used the GPU while it was timed: not trustworthy)"
    return "".join([outcome, *(f" (WARNING: {warning})" for warning in result.warnings)])
