"""Where a study's trial time went, defined once for the summary, the report, status and MLflow.

Trial time is each measured trial from its start to its record, every worker's (with one GPU a worker,
it is GPU time). It splits by how the trials ended (ok, pruned, failed: these add up to it), and across
those, the part spent compiling: a compiled trial's ``compile_s`` (an eager trial's warm-up is not
compile). Re-measurement runs come after the search and are counted apart. The pruned share is what the
sweep paid for trials that only showed they were slow, compile included (the aim: a tenth or less).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from autotune.records.trial import TrialRecord

__all__ = ["OutcomeTime", "TimeShares", "time_shares"]


@dataclass(frozen=True)
class OutcomeTime:
    """Trial time of the trials that ended one way: in all, and the compiling part of it."""

    seconds: float = 0.0
    compile_s: float = 0.0

    def plus(self, record: TrialRecord) -> OutcomeTime:
        return OutcomeTime(self.seconds + record.duration_s, self.compile_s + record.compile_s)


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
            return f"{seconds / 60:.1f} min ({seconds / self.trial_s:.0%})"

        return (
            f"trial time {self.trial_s / 60:.1f} min: compiling {part(self.compile_s)}, "
            f"in trials that ended pruned {part(self.pruned.seconds)}"
        )

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
    for record in measured:
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
    return TimeShares(ok, pruned, failed, remeasure_s, runs, estimated)
