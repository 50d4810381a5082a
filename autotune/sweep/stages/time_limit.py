"""A sweep's time limit, finishing stages included: what the search leaves them, and what a finalist needs.

A time limit (``budget.timeout``, ``--timeout``) bounds the whole sweep, as nearly as the study's own
trials can tell what is left to do. The search stops once the time left is what the finishing stages
are expected to take, and a typical search trial (:meth:`TimeLimit.search_over`): re-measuring the top
(``--remeasure-top``, each run compiling from the study's cache), then the finalists and their own
re-measurement, and the rehearsal of the winner's production start (about one re-measurement). And the
finalists stage starts a finalist only when it is expected to end, its re-measurement included, before the
limit (:func:`finalist_estimate`); one that is not says so in one line. The top's re-measurements are never
skipped (they decide the winner), nor is the report; a leader re-measured after them (a trial measured once that
leads once the top's medians fell below it, :mod:`autotune.sweep.stages.remeasure`) is re-measured only where its runs,
the finalists and the rehearsal are expected to end before the limit (:meth:`TimeLimit.after_remeasuring`).

The estimates come from the study: a trial's measuring time is its duration less its compile; a
finalist compiles as its search trial did (or as the study's median cold compile, when that is
longer: a search trial may have compiled from the cache) times what its options cost. That cost is
the ratio a finalist of this study already showed, else a measured factor (:data:`OPTION_COMPILE_FACTOR`).
The search keeps at most half of the time limit for the finishing stages, and keeps nothing for a finalist
that would not fit in that half: a limit too short for its finalists is spent searching, and the finalists
that do not fit are not started.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from autotune.numbers import duration
from autotune.records import Remeasurement, StudyRecords, TrialRecord
from autotune.search.costmodel import graph_key
from autotune.space import Space
from autotune.space.settings import FinalistsSpec
from autotune.sweep.options import SweepOptions

__all__ = [
    "CACHED_COMPILE",
    "MAX_RESERVE_SHARE",
    "MODE_COMPILE_FACTOR",
    "OPTION_COMPILE_FACTOR",
    "Estimate",
    "TimeLimit",
    "finalist_estimate",
    "finalist_sources",
]

# A finalist's compile over its search trial's, per Inductor option, as measured on an H100 (BENCHMARKS.md):
# coordinate_descent_tuning 148.4 s against 25.1 s for GPT-2 (5.9x), 234.5 s against 47.2 s for ResNet-50 (5.0x);
# max-autotune 240 s on a vision transformer whose default compile took about 33 s (7.3x, an H200).
OPTION_COMPILE_FACTOR = {"coordinate_descent_tuning": 6.0, "max_autotune": 8.0}
MODE_COMPILE_FACTOR = {"max-autotune": 8.0, "max-autotune-no-cudagraphs": 8.0}
# A compile from the study's cache over a cold one: GPT-2 on an H100, 2.4 s against 25.1 s (README, Compile time).
CACHED_COMPILE = 0.1
MAX_RESERVE_SHARE = 0.5  # of the time limit, at most, kept from the search for the finishing stages


@dataclass(frozen=True)
class Estimate:
    """Seconds a piece of finishing work is expected to take, and how that was reckoned (for its line)."""

    seconds: float
    why: str


def finalist_sources(records: StudyRecords, spec: FinalistsSpec) -> list[TrialRecord]:
    """The best ranked search trials (finalists left out) that ``spec``'s overrides change: the finalists' sources.

    Without a compile mode of its own, the stage passes over eager configurations: Inductor
    options would change nothing there. It passes over a configuration whose finalist would compile the graph of a
    better one's too (they differ only in graph-neutral knobs, :func:`autotune.search.costmodel.graph_key`: the
    fused optimizer, cuDNN's flags, the data path): the options would make the same kernels for both, and what tells
    the two apart the search measured already. On an H100 both of ResNet-50's finalists were such twins (cuDNN's
    benchmark on and off): the second's 66 s, after the first's 294 s, measured the first again.
    """
    overrides = spec.knob_overrides()
    sources: list[TrialRecord] = []
    graphs: set[str | None] = set()
    for record in records.ranked:
        if record.finalist_of is not None:
            continue
        if "compile_mode" not in overrides and record.params.get("compile_mode", "none") == "none":
            continue
        changed = {**record.params, **overrides}
        graph = graph_key(changed)
        if changed != record.params and (graph is None or graph not in graphs):
            sources.append(record)
            graphs.add(graph)
    return sources[: spec.top]


def _measuring_s(record: TrialRecord) -> float:
    """The part of ``record``'s trial that was not compiling: start-up, warm-up, the timed window."""
    return max(0.0, record.duration_s - record.compile_s)


def _cold_compile_s(records: StudyRecords) -> float | None:
    """The median compile of the study's compiled search trials (None before one compiled)."""
    seconds = [r.compile_s for r in records.measured if r.compiled and r.compile_s > 0 and r.finalist_of is None]
    return statistics.median(seconds) if seconds else None


def _base_compile_s(record: TrialRecord, cold: float | None) -> float:
    """What compiling ``record``'s graph costs without a cache: its own compile, or the study's median if longer;
    for an eager trial the study's median, else its whole duration (nothing better is known)."""
    if record.compiled:
        return max(record.compile_s, cold or 0.0)
    return cold if cold is not None else record.duration_s


def _table_factor(spec: FinalistsSpec) -> tuple[float, str]:
    """The compile factor of ``spec``'s options from the measured table: 1 plus each costly option's extra."""
    extra, named = 0.0, []
    for option, value in spec.inductor.items():
        if value is True and option in OPTION_COMPILE_FACTOR:
            extra += OPTION_COMPILE_FACTOR[option] - 1
            named.append(option)
    if spec.compile_mode in MODE_COMPILE_FACTOR:
        extra += MODE_COMPILE_FACTOR[spec.compile_mode] - 1
        named.append(f"compile_mode={spec.compile_mode}")
    return 1.0 + extra, ", ".join(named) or "its options"


def compile_factor(spec: FinalistsSpec, records: StudyRecords) -> tuple[float, str]:
    """How much longer a finalist compiles than its search trial: as this study's finalists did (the largest
    ratio), else by the measured table; and in words."""
    cold = _cold_compile_s(records)
    seen = []
    for record in records.measured:
        if record.finalist_of is None or not record.compiled or record.compile_s <= 0:
            continue
        try:
            source = records.trial(record.finalist_of)
        except KeyError:
            continue
        base = _base_compile_s(source, cold)
        if base > 0:
            seen.append((record.compile_s / base, record.number))
    if seen:
        ratio, number = max(seen)
        return ratio, f"as finalist trial {number} did"
    factor, named = _table_factor(spec)
    return factor, f"for {named}"


def finalist_estimate(
    source: TrialRecord, spec: FinalistsSpec, records: StudyRecords, remeasure_runs: int = 0
) -> Estimate:
    """What ``source``'s finalist is expected to take: its trial (measuring as ``source`` did, compiling its
    graph times :func:`compile_factor`) and ``remeasure_runs`` re-measurements of it from the study's cache."""
    factor, how = compile_factor(spec, records)
    compile_s = _base_compile_s(source, _cold_compile_s(records)) * factor
    measuring = _measuring_s(source)
    run_s = measuring + CACHED_COMPILE * compile_s
    seconds = measuring + compile_s + remeasure_runs * run_s
    why = f"compiling about {duration(compile_s)} (x{factor:.3g} {how}), measuring {duration(measuring)}"
    if remeasure_runs:
        why += f", {remeasure_runs} re-measurements {duration(remeasure_runs * run_s)}"
    return Estimate(seconds, why)


def _run_s(again: Remeasurement | None) -> float | None:
    """Seconds a run of ``again`` took (None where it was not timed, or no run measured)."""
    return again.seconds / len(again.values) if again is not None and again.seconds and again.values else None


def remeasure_run_s(record: TrialRecord, records: StudyRecords) -> float:
    """One re-measurement run of ``record``: what its earlier re-measurements took, where it has them; else its
    measuring and its compile again from the study's cache, but no more than the longest run of the study's
    re-measurements of its kind (compiled or eager: a compiled run compiles from the cache too). A trial's own
    measuring counts the eager probe that may prune it, which a re-measurement does not run: on an H200 GPT-2's
    informed start was reckoned at about 25 s a run from its trial, and the re-measurements of a trial like it took
    9.4 s a run."""
    own = _run_s(record.remeasured)
    if own is not None:
        return own
    compile_s = _base_compile_s(record, _cold_compile_s(records)) if record.compiled else 0.0
    estimate = _measuring_s(record) + CACHED_COMPILE * compile_s
    timed = [
        run
        for other in records.measured
        if other.compiled == record.compiled and (run := _run_s(other.remeasured)) is not None
    ]
    return min(estimate, max(timed)) if timed else estimate


def _typical_trial_s(records: StudyRecords) -> float:
    """The median duration of the study's measured search trials: what the next one is expected to take."""
    seconds = [r.duration_s for r in records.measured if r.finalist_of is None]
    return statistics.median(seconds) if seconds else 0.0


class TimeLimit:
    """A sweep's time limit: ``deadline`` (``time.time()``; None: none) of a limit ``limit_s`` seconds long."""

    def __init__(self, deadline: float | None, limit_s: float | None, space: Space, options: SweepOptions) -> None:
        self.deadline = deadline
        self.limit_s = limit_s
        self.space = space
        self.options = options

    @classmethod
    def of(cls, deadline: float | None, space: Space, options: SweepOptions) -> TimeLimit:
        return cls(deadline, options.timeout_s or space.budget.timeout_s, space, options)

    @property
    def remeasure_runs(self) -> int:
        """Re-measurement runs per re-measured trial (0: the sweep does not re-measure)."""
        return self.options.remeasure_repeats if self.options.remeasure_top else 0

    @property
    def _reserve_cap(self) -> float:
        """The most the finishing stages are kept: :data:`MAX_RESERVE_SHARE` of the limit (no limit: no cap)."""
        return MAX_RESERVE_SHARE * self.limit_s if self.limit_s else float("inf")

    def reserve(self, records: StudyRecords) -> float:
        """Seconds the finishing stages are expected to take, from what the study holds now; at most
        :data:`MAX_RESERVE_SHARE` of the limit. None of it with ``--replay`` (nothing runs after the search).

        A finalist that would not fit in what is kept is not counted: the finalists stage would not start it, so
        keeping time for it would only cut the search short (an H100 GPT-2 sweep of 7 minutes kept 3.5 of them
        for two finalists that were then not started).
        """
        if self.options.replay is not None:
            return 0.0
        cap, total = self._reserve_cap, 0.0
        if self.remeasure_runs:
            for record in records.ranked[: self.options.remeasure_top]:
                if record.remeasured is None:
                    total += self.remeasure_runs * remeasure_run_s(record, records)
        return min(total + self._later_stages_s(records, cap - total), cap)

    def after_remeasuring(self, records: StudyRecords, finalists: bool, left_s: float) -> float:
        """Seconds the stages after a re-measurement are expected to take, from what the study holds now: the
        rehearsal, and where ``finalists`` (their stage is still to come) the finalists not measured yet that fit
        in ``left_s`` and in :data:`MAX_RESERVE_SHARE` of the limit (the stage would not start the others)."""
        return self._later_stages_s(records, min(self._reserve_cap, left_s), finalists)

    def _later_stages_s(self, records: StudyRecords, room: float, finalists: bool = True) -> float:
        """The rehearsal of the winner's start (about one run) and, with ``finalists``, the finalists not measured yet,
        each counted only where it fits in what is left of ``room``."""
        total = 0.0
        if self.options.rehearse_start and records.ranked and records.ranked[0].rehearsable:
            total += remeasure_run_s(records.ranked[0], records)  # the winner's start, rehearsed: about one run
        spec = self.space.finalists
        if spec is not None and finalists:
            overrides = spec.knob_overrides()
            for source in finalist_sources(records, spec):
                if records.measured_with({**source.params, **overrides}) is None:
                    needs = finalist_estimate(source, spec, records, self.remeasure_runs).seconds
                    if total + needs <= room:
                        total += needs
        return total

    def search_over(self, records: StudyRecords, now: float | None = None) -> str | None:
        """Why the search stops for time: the limit passed, or the time left is what the finishing stages need and
        a typical search trial (the next one would eat into their time); else None. With no finishing stages to
        wait for, the search starts trials until the limit, as it always has."""
        if self.deadline is None:
            return None
        now = time.time() if now is None else now
        if now >= self.deadline:
            return "sweep time limit reached"
        reserve = self.reserve(records)
        if reserve > 0 and now + _typical_trial_s(records) + reserve >= self.deadline:
            return (
                f"sweep time limit reached, less the {duration(reserve)} kept for the finishing stages "
                "(re-measuring, finalists, rehearsing the winner's start)"
            )
        return None
