"""Where a study's trial time went, defined once for the summary, the report, status and MLflow.

Trial time is each measured trial from its start to its record, every worker's (with one GPU a worker,
it is GPU time). It splits by how the trials ended (ok, pruned, failed: these add up to it), and across
those, the part spent compiling: a compiled trial's ``compile_s`` (an eager trial's warm-up is not
compile). Re-measurement runs come after the search and are counted apart. The pruned share is what the
sweep paid for trials that only showed they were slow, compile included (the aim: a tenth or less).

Where the compiling went, by the compiler's own clocks (:data:`autotune.measurement.COMPILE_PHASE_METRICS`), is
summed over the compiled trials that recorded it (trials of older autotune versions did not); so are the graphs
compiled ahead of their trials (:mod:`autotune.sweep.proposals.compile_ahead`), and, over every trial, eager or
compiled, the time its unpinned Triton kernels spent autotuning (:mod:`autotune.kernels.autotuning`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from autotune.measurement import (
    AHEAD_METRIC,
    AHEAD_WAIT_METRIC,
    AUTOTUNE_COMPILE_METRIC,
    AUTOTUNE_METRIC,
    COMPILE_PHASE_METRICS,
)
from autotune.numbers import minutes
from autotune.records.trial import TrialRecord

__all__ = ["AheadTime", "AutotuneTime", "CompilePhases", "OutcomeTime", "TimeShares", "time_shares"]


@dataclass(frozen=True)
class OutcomeTime:
    """Trial time of the trials that ended one way: in all, and the compiling part of it."""

    seconds: float = 0.0
    compile_s: float = 0.0

    def plus(self, record: TrialRecord) -> OutcomeTime:
        return OutcomeTime(self.seconds + record.duration_s, self.compile_s + record.compile_s)


@dataclass(frozen=True)
class CompilePhases:
    """The compiled trials' compile by the compiler's clocks, summed over the ``trials`` that recorded it, beside
    their ``compile_s`` (their first steps above the steady step): seconds by metric of COMPILE_PHASE_METRICS."""

    trials: int = 0
    compile_s: float = 0.0
    seconds: dict[str, float] = field(default_factory=dict)

    def plus(self, record: TrialRecord) -> CompilePhases:
        metrics = record.first_metrics
        if not record.compiled or not all(isinstance(metrics.get(m), int | float) for m in COMPILE_PHASE_METRICS):
            return self
        summed = {m: self.seconds.get(m, 0.0) + float(metrics[m]) for m in COMPILE_PHASE_METRICS}
        return CompilePhases(self.trials + 1, self.compile_s + record.compile_s, summed)

    def line(self) -> str | None:
        """``compiling by the compiler's clocks (9 trials, 2.1 min): tracing 0.5 min, Inductor 1.3 min (waiting
        for kernel builds 0.6 min), the first steps' other one-off work 0.3 min``, or None without a record."""
        if not self.trials:
            return None
        wall, inductor, wait = (self.seconds[m] for m in COMPILE_PHASE_METRICS)
        other = max(0.0, self.compile_s - wall)  # autotuning, CUDA graph capture, cuDNN's search in the first steps

        return (
            f"compiling by the compiler's clocks ({_trials(self.trials)}, {minutes(self.compile_s)}): "
            f"tracing {minutes(max(0.0, wall - inductor))}, Inductor {minutes(inductor)} (waiting for kernel "
            f"builds {minutes(wait)}), the first steps' other one-off work {minutes(other)}"
        )


@dataclass(frozen=True)
class AheadTime:
    """The trials whose graphs were compiled ahead of them (:mod:`autotune.sweep.proposals.compile_ahead`): how many,
    what those compiles took on the CPU while other trials ran (not trial time), and how long the trials waited for them
    (part of their ``compile_s``)."""

    trials: int = 0
    compile_s: float = 0.0
    wait_s: float = 0.0

    def plus(self, record: TrialRecord) -> AheadTime:
        metrics = record.first_metrics
        ahead = metrics.get(AHEAD_METRIC)
        if not isinstance(ahead, int | float):
            return self
        wait = metrics.get(AHEAD_WAIT_METRIC)
        return AheadTime(
            self.trials + 1, self.compile_s + ahead, self.wait_s + (wait if isinstance(wait, int | float) else 0)
        )

    def line(self) -> str | None:
        """``compiled ahead, while other trials ran: the graphs of 5 trials (2.9 min on the CPU); they waited 0.3 min
        for them, counted as compiling``, or None where nothing was."""
        if not self.trials:
            return None
        return (
            f"compiled ahead, while other trials ran: the graphs of {_trials(self.trials)} "
            f"({minutes(self.compile_s)} on the CPU); they waited {minutes(self.wait_s)} for them, counted as compiling"
        )


@dataclass(frozen=True)
class AutotuneTime:
    """The trials whose unpinned ``triton.autotune`` kernels benchmarked their configs (:mod:`autotune.kernels.
    autotuning`): how many, those rounds' seconds (in their first steps, nearly always: one-off work, in a compiled
    trial's ``compile_s``), and the part compiling the configs, in parallel before the benchmarks."""

    trials: int = 0
    seconds: float = 0.0
    compile_s: float = 0.0

    def plus(self, record: TrialRecord) -> AutotuneTime:
        metrics = record.first_metrics
        seconds, compile_s = metrics.get(AUTOTUNE_METRIC), metrics.get(AUTOTUNE_COMPILE_METRIC)
        if not isinstance(seconds, int | float):
            return self
        compiled = float(compile_s) if isinstance(compile_s, int | float) else 0.0
        return AutotuneTime(self.trials + 1, self.seconds + seconds, self.compile_s + compiled)

    def line(self) -> str | None:
        """``Triton kernels autotuning in their trials: 3 trials, 0.8 min, 0.2 min of it compiling their configs``,
        or None where no kernel autotuned."""
        if not self.trials:
            return None
        return (
            f"Triton kernels autotuning in their trials: {_trials(self.trials)}, {minutes(self.seconds)}, "
            f"{minutes(self.compile_s)} of it compiling their configs"
        )


@dataclass(frozen=True)
class TimeShares:
    """Trial time by outcome (ok, feasible or not; pruned; failed), and the re-measurement runs after the
    search (``remeasure_estimated``: some runs were not timed and count at their trial's own duration)."""

    ok: OutcomeTime = OutcomeTime()
    pruned: OutcomeTime = OutcomeTime()
    failed: OutcomeTime = OutcomeTime()
    remeasure_s: float = 0.0
    remeasure_runs: int = 0
    remeasure_estimated: bool = False
    phases: CompilePhases = CompilePhases()
    ahead: AheadTime = AheadTime()
    autotuning: AutotuneTime = AutotuneTime()

    @property
    def trial_s(self) -> float:
        return self.ok.seconds + self.pruned.seconds + self.failed.seconds

    @property
    def compile_s(self) -> float:
        return self.ok.compile_s + self.pruned.compile_s + self.failed.compile_s

    @property
    def pruned_s(self) -> float:
        return self.pruned.seconds

    def share(self, seconds: float) -> float | None:
        """``seconds`` as a share of trial time (None before any trial ran)."""
        return seconds / self.trial_s if self.trial_s > 0 else None

    @property
    def pruned_share(self) -> float | None:
        return self.share(self.pruned.seconds)

    @property
    def compile_share(self) -> float | None:
        return self.share(self.compile_s)

    def line(self) -> str | None:
        """``trial time 12.4 min: compiling 3.1 min (25%), in trials that ended pruned 0.8 min (6%)``, or None
        before any trial ran."""
        if self.trial_s <= 0:
            return None

        def part(seconds: float) -> str:
            return f"{minutes(seconds)} ({seconds / self.trial_s:.0%})"

        return (
            f"trial time {minutes(self.trial_s)}: compiling {part(self.compile_s)}, "
            f"in trials that ended pruned {part(self.pruned.seconds)}"
        )

    def detail_lines(self) -> list[str]:
        """What the views print under :meth:`line`, where there is something to say: the compile by the
        compiler's clocks, the graphs compiled ahead, the kernels' autotuning."""
        said = (self.phases.line(), self.ahead.line(), self.autotuning.line())
        return [text for text in said if text]

    def parts(self) -> dict[str, float]:
        """Label -> seconds, disjoint, as the report stacks them: compiling (in every trial), the rest of each
        outcome's trial time, then the re-measurements. All but the last add up to trial time."""
        runs = f"re-measuring ({self.remeasure_runs} runs{', estimated' if self.remeasure_estimated else ''})"
        return {
            "compiling": self.compile_s,
            "ok trials, the rest": self.ok.seconds - self.ok.compile_s,
            "pruned trials, the rest": self.pruned.seconds - self.pruned.compile_s,
            "failed trials, the rest": self.failed.seconds - self.failed.compile_s,
            runs: self.remeasure_s,
        }

    @property
    def total_s(self) -> float:
        """Trial time and re-measurements together: what :meth:`parts` add up to."""
        return self.trial_s + self.remeasure_s


def time_shares(measured: Iterable[TrialRecord]) -> TimeShares:
    """The time shares of these measured records (re-measurements included)."""
    ok, pruned, failed = OutcomeTime(), OutcomeTime(), OutcomeTime()
    remeasure_s, runs, estimated = 0.0, 0, False
    phases, ahead, autotuning = CompilePhases(), AheadTime(), AutotuneTime()
    for record in measured:
        phases, ahead, autotuning = phases.plus(record), ahead.plus(record), autotuning.plus(record)
        if record.ok:
            ok = ok.plus(record)
        elif record.pruned:
            pruned = pruned.plus(record)
        else:
            failed = failed.plus(record)
        again = record.remeasured
        if again is not None and again.values:
            runs += len(again.values)
            if again.seconds is not None:
                remeasure_s += again.seconds
            else:
                remeasure_s += len(again.values) * record.duration_s
                estimated = True
    return TimeShares(ok, pruned, failed, remeasure_s, runs, estimated, phases, ahead, autotuning)


def _trials(count: int) -> str:
    """``1 trial``, ``9 trials``."""
    return f"{count} trial" if count == 1 else f"{count} trials"
