"""The finishing stages (re-measure, finalists, profile, report), once per study however many processes share it.

What runs once is leased in the study's storage (:mod:`autotune.sweep.workers.leases`). Every process that
searches the study holds a search lease while it does (:meth:`Finishing.searching`). Then, in each
process whose search has ended, and in a ``--gpus`` sweep's finishing worker (:meth:`Finishing.run`):

1. **take the study's finish lease.** While another process holds it, wait, saying once for whom. It
   comes free when the holder releases it, or dies: at once for a process of this host, ``GRACE_S``
   after its last renewal for one on another host.
2. **wait for the searches.** As holder, wait until no other process searches the study and no trial
   runs; on the way, the trials of dead workers are failed and retried (:mod:`autotune.sweep.workers.orphaned_trials`),
   and a retried one is measured by a worker still searching.
3. **run the stages**, unless they ran already for this search (below); note on the study what they
   began from (``autotune.finished``: the measured trials it held then, and who ran them).
4. **release the lease**, also when stopped (Ctrl-C) or failing: the next process then runs the stages.

A process that waited for another holder (step 1) skips the stages when that holder's began over at
least as many measured trials as the study held when its own search ended: measured trials are never
removed, so they saw every trial this process measured. The two processes of the several-workers
recipe thus re-measure the top once, not once each, and then print the same summary (read from the
study), naming the same winner. A process that finds the lease free runs the stages, as a resumed sweep
always has: each stage skips the work done already (a trial re-measured, a pair profiled).

With ``--storage memory`` the study is this process's alone: the stages simply run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from autotune.interrupts import StopSignals
from autotune.records import schema
from autotune.sweep.context import Stage, SweepContext
from autotune.sweep.workers.leases import FINISH, LeaseTable, held, searching
from autotune.sweep.workers.orphaned_trials import OrphanWatch

__all__ = ["POLL_S", "Finishing", "pause"]

POLL_S = 0.5  # how often a waiting process looks at the study again


def pause(signals: StopSignals) -> None:
    """Wait ``POLL_S`` before looking again; a stop signal ends the wait at once."""
    with signals.interruptible():
        time.sleep(POLL_S)


class Finishing:
    """One process's part in running its study's finishing stages once (see the module docstring)."""

    def __init__(
        self, ctx: SweepContext, leases: LeaseTable | None, orphans: OrphanWatch, signals: StopSignals, holder: str
    ) -> None:
        self.ctx = ctx
        self.leases = leases
        self.orphans = orphans
        self.signals = signals
        self.holder = holder  # this process's name in the study: host:pid

    @contextmanager
    def searching(self) -> Iterator[None]:
        """This process searches the study while the body runs: every process's finishing stages wait for it."""
        with searching(self.leases, self.holder):
            yield

    def run(self, stages: Sequence[Stage], searched: int) -> None:
        """Run ``stages`` once for the study; ``searched``: the measured trials its budget counts (its finalists left
        out) when this process's search ended."""
        if self.leases is None:
            self._run(stages)
            return
        waited_for = self._acquire(self.leases)
        with held(self.leases, FINISH, self.holder):
            self._wait_for_searches(self.leases)
            done = self.ctx.study.user_attrs.get(schema.STUDY_ATTR_FINISHED)
            if waited_for is not None and done is not None and done["measured"] >= searched:
                self.ctx.progress.message(f"finishing stages: run by {done['by']} over this search; not run again")
                return
            self._run(stages)

    def _run(self, stages: Sequence[Stage]) -> None:
        ctx = self.ctx
        ctx.records.refresh()
        begun = ctx.records.budgeted  # the search's trials: the finalists these stages add do not change it
        for stage in stages:
            stage.run(ctx)
        ctx.study.set_user_attr(schema.STUDY_ATTR_FINISHED, {"measured": begun, "by": self.holder})

    def _acquire(self, leases: LeaseTable) -> str | None:
        """Take the finish lease, waiting while another process holds it; returns the last holder waited for."""
        waited_for = None
        while (holder := leases.acquire(FINISH, self.holder)) is not None:
            if holder != waited_for:
                self.ctx.progress.message(f"waiting for {holder}, which runs this study's finishing stages")
                waited_for = holder
            pause(self.signals)
        return waited_for

    def _wait_for_searches(self, leases: LeaseTable) -> None:
        """Until no other process searches the study and no trial runs (those of dead workers failed on the way)."""
        records, said = self.ctx.records, False
        while True:
            records.refresh()
            if self.orphans.check(records.running):
                records.refresh()
            searchers = [name for name in leases.searchers() if name != self.holder]
            if not searchers and not records.running:
                return
            if not said:
                self.ctx.progress.message(f"finishing stages: waiting for {_others(searchers, len(records.running))}")
                said = True
            pause(self.signals)


def _others(searchers: list[str], running: int) -> str:
    """``2 processes still searching this study (host:1, host:2)``, or the trials that still run."""
    if searchers:
        plural = "es" if len(searchers) > 1 else ""
        return f"{len(searchers)} process{plural} still searching this study ({', '.join(searchers)})"
    return f"{running} trial{'s' if running > 1 else ''} still running"
