"""The questions every view asks of a study's measured trials, answered once: the record model's answers.

:class:`StudyAnswers` is what :class:`~autotune.records.study.StudyRecords` answers from the records it read:
the order, the winner, the Pareto front and speedup (:mod:`~autotune.records.ranking`), where the time went
(:mod:`~autotune.records.timeshares`), how the trials ended, the time to a configuration near the winner and the
trial to export. The reading (the storage, re-measurements, rehearsed starts) is the subclass's; answers that
combine every record are computed on first use and dropped at each change (:meth:`StudyAnswers._forget`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property

from autotune.errors import AutotuneError
from autotune.expr import Expression
from autotune.records import ranking
from autotune.records.timeshares import TimeShares, time_shares
from autotune.records.trial import TrialRecord

__all__ = ["StudyAnswers", "Tally", "kernel_never_run_warning"]


def kernel_never_run_warning(path: str) -> str:
    """The line every view shows for a listed kernel no finished trial launched
    (:meth:`StudyAnswers.kernels_never_run`), worded once: the status, the sweep's summary and its MLflow run."""
    return f"WARNING: listed kernel {path} never ran in any finished trial (is it the one the model calls?)"


def _start_order(record: TrialRecord) -> tuple[float, int]:
    return (record.started.timestamp() if record.started is not None else float("inf"), record.number)


@dataclass(frozen=True)
class Tally:
    """How the measured trials ended: ok (``infeasible`` of them broke a constraint), pruned, failed."""

    measured: int
    pruned: int
    failed: int
    infeasible: int = 0
    finalists: int = 0  # of the measured: the finishing stage's finalists, which the budget does not count

    @property
    def budgeted(self) -> int:
        """The measured trials the budget counts."""
        return self.measured - self.finalists

    @property
    def ok(self) -> int:
        return self.measured - self.pruned - self.failed


class _Derived:
    """What the records imply together, computed on first use and dropped at the next change."""

    def __init__(self, records: StudyAnswers) -> None:
        self._records = records

    @cached_property
    def ranked(self) -> list[TrialRecord]:
        return ranking.order(self._records.measured, self._records.direction)

    @cached_property
    def ranks(self) -> dict[int, int]:
        return {record.number: i + 1 for i, record in enumerate(self.ranked)}

    @cached_property
    def default(self) -> TrialRecord | None:
        return next((r for r in self._records.measured if r.default), None)

    @cached_property
    def pareto(self) -> frozenset[int]:
        directions = [direction for _, direction in self._records.objectives]
        return ranking.pareto_front(self._records.measured, directions) if len(directions) > 1 else frozenset()


class StudyAnswers:
    """Study-wide answers over :attr:`measured` (see the module docstring); ``objectives`` are the study's
    ``(metric, direction)`` pairs, the first one ranking."""

    objectives: tuple[tuple[str, str], ...]
    _derived: _Derived

    @property
    def measured(self) -> list[TrialRecord]:
        """The measured trials, in trial-number order: the reader's."""
        raise NotImplementedError

    def _forget(self) -> None:
        """Drop the answers computed over every record: the records changed."""
        self._derived = _Derived(self)

    @property
    def direction(self) -> str:
        return self.objectives[0][1]

    @property
    def metric(self) -> str:
        return self.objectives[0][0]

    def tally(self) -> Tally:
        """How the measured trials ended (every worker's)."""
        outcomes = Counter(r.outcome for r in self.measured)
        pruned, infeasible = outcomes["pruned"], outcomes["infeasible"]
        failed = len(self.measured) - pruned - infeasible - outcomes["ok"]
        finalists = len(self.measured) - self.budgeted
        return Tally(len(self.measured), pruned, failed, infeasible, finalists)

    @property
    def budgeted(self) -> int:
        """How many measured trials the budget counts: the search's, not the finalists its finishing stage ran."""
        return sum(1 for r in self.measured if r.finalist_of is None)

    def time(self) -> TimeShares:
        """Where the measured trials' time went."""
        return time_shares(self.measured)

    # -- ranking -----------------------------------------------------------------------------------
    @property
    def ranked(self) -> list[TrialRecord]:
        """The feasible measured trials, best first: the leaderboard's ranked rows."""
        return self._derived.ranked

    def rank(self, number: int) -> int | None:
        """Trial ``number``'s place among :attr:`ranked` (1 = the winner), None when it does not rank."""
        return self._derived.ranks.get(number)

    @property
    def winner(self) -> TrialRecord | None:
        """The best feasible measured trial, by its ranked value (the re-measured median where there is one)."""
        ranked = self._derived.ranked
        return ranked[0] if ranked else None

    @property
    def default(self) -> TrialRecord | None:
        """The measured PyTorch-default trial, ok or not."""
        return self._derived.default

    @property
    def baseline(self) -> float | None:
        """The ok default trial's ranked value of the first objective: the yardstick of every speedup."""
        default = self._derived.default
        return default.value if default is not None and default.ok else None

    def speedup(self, record: TrialRecord) -> float | None:
        """``record``'s ranked value over the default's (> 1 is better either way); None unless it ended ok.

        The default trial is its own yardstick, also while it is being recorded (not taken in yet).
        """
        if not record.ok:
            return None
        baseline = record.value if record.default else self.baseline
        return ranking.speedup(record.value, baseline, self.direction)

    @property
    def pareto(self) -> frozenset[int]:
        """With several objectives, the feasible trials no other one beats on every objective; else empty."""
        return self._derived.pareto

    def faster_infeasible(self) -> list[TrialRecord]:
        """Ok trials that broke a constraint yet measured better than the winner (every one, with no winner)."""
        winner = self.winner
        return [
            r
            for r in self.measured
            if r.ok
            and not r.feasible
            and r.value is not None
            and (winner is None or winner.value is None or ranking.better(r.value, winner.value, self.direction))
        ]

    def kernels_never_run(self) -> list[str]:
        """Listed kernels (the space's ``kernels:``) that no finished trial launched: likely not the ones the model
        calls. A trial whose params route around a kernel (the model's own LayerNorm, not the listed one) launches
        it zero times too, so only every finished trial together says so; empty before any finished."""
        launched: dict[str, int] = {}
        for record in self.measured:
            if record.result is None or not record.ok:
                continue
            for path, entry in record.result.kernels.items():
                if "launches" in entry:  # a listed kernel's entry; one its own autotuner chose for has none
                    launched[path] = launched.get(path, 0) + int(entry["launches"])
        return sorted(path for path, count in launched.items() if count == 0)

    def time_to_within(self, fraction: float = 0.02, target: float | None = None) -> tuple[float, int] | None:
        """Trial time (seconds, every measured trial's, in the order they started) until the first feasible trial
        within ``fraction`` of the winner's ranked value finished, and how many measured trials that took;
        None without a winner. With one GPU a worker, it is GPU time: what a sweep paid to find its answer.

        ``target`` replaces the winner's value (a benchmark's best known value: scripts/cost_benchmark.py); then
        None also when no trial came within ``fraction`` of it."""
        if target is None:
            winner = self.winner
            if winner is None or winner.value is None:
                return None
            target = winner.value
        spent = 0.0
        for count, record in enumerate(sorted(self.measured, key=_start_order), start=1):
            spent += record.duration_s
            value = record.value if record.feasible else None
            if value is not None and not ranking.better(target, value, self.direction, margin=fraction):
                return spent, count
        return None  # only with a target: the winner itself is within

    def trials_since_best(self) -> int:
        """Measured trials since the ranked value of the first objective last improved (``--patience``)."""
        best: float | None = None
        since = 0
        for record in self.measured:
            value = record.value if record.feasible else None
            if value is not None and (best is None or ranking.better(value, best, self.direction)):
                best, since = value, 0
            else:
                since += 1
        return since

    def choose(self, rule: str | None = None) -> TrialRecord:
        """The trial to export: the winner, or with ``rule`` the best-ranked feasible trial that satisfies it.

        ``rule`` is an :class:`~autotune.expr.Expression` over the trial's params and ranked metrics (e.g.
        ``peak_mem_gib <= 40``). With several objectives, Pareto trials are tried before the others.
        Raises :class:`AutotuneError` when no trial qualifies.
        """
        ranked = list(self.ranked)
        if not ranked:
            raise AutotuneError(f"no feasible ok trial to choose from ({len(self.measured)} measured trials)")
        if rule is None:
            return ranked[0]
        expression = Expression(rule)
        if len(self.objectives) > 1:
            ranked.sort(key=lambda r: r.number not in self.pareto)  # stable: rank order kept within each group
        for record in ranked:
            if expression.evaluate({**record.params, **record.metrics}):
                return record
        raise AutotuneError(f"no feasible ok trial satisfies {expression.text!r} ({len(ranked)} checked)")
