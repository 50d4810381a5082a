"""Parking: a trial that would wait for its graph's compile steps aside, and the GPU measures other trials meanwhile.

With compiles ahead (:mod:`autotune.sweep.proposals.compile_ahead`) a trial whose graph was still compiling waited for
that compile, the GPU idle: on an H100 the informed start waited 50 s for ResNet-50's graph (17 s for GPT-2's), and
trials the sampler chose waited up to 33 s more, while eager trials that need no compile were still to come. So a
proposal that would compile, or wait for a compile, is parked instead where a compile slot can take its graph
(:meth:`~autotune.sweep.proposals.compile_ahead.CompileAhead.claim`: the compile ahead already running, else one started
now, in a free slot or in place of the youngest guess no trial waits for), and the next ask measures another
configuration.

A parked trial is measured (before the next ask) as soon as its graph's compile has ended, and when the budget's
last trials are parked ones or the search stops (then the one whose compile is predicted to end first, or the longest
parked where nothing is predicted, waits for the rest of its compile). Only where the search
cannot go on measuring (its device was taken out, a stop signal, an error) is it recorded as interrupted and queued
again for a resumed sweep, like a trial stopped by Ctrl-C: nothing chosen is lost.

To Optuna a parked trial is RUNNING, its heartbeat kept: it holds its place in the budget, other workers leave it
alone, and a proposal of the same configuration is answered as a repeat of it. Its record starts when it was taken
up again (``autotune.parked_s``, :mod:`autotune.records.schema`), so its duration, and with it the sweep's GPU-time
figures, count its measurement and not the trials measured while it stood aside.

Trials of at most three graphs are parked at a time (see the end). The sampler learns nothing from a parked trial
until it is measured, and on an H100 (BENCHMARKS.md) parking up to one trial per compile slot let
TPE propose four more configurations of one poor region while the first waited: all four were pruned after their
compiles (the pruned share rose from 5% to 33% of ResNet-50's search) and the winner came out 4% lower. With the
informed start alone parked, six eager trials ran during its compile and it then waited for nothing (18 s, against
58 s waiting before). With one trial at a time a second configuration of the parked trial's graph
(ResNet-50's fp16 winner, with the fused optimizer) then waited 38.9 s for the compile the parked one stood aside
for, the GPU idle: so a proposal of the graph already parked for is parked beside it (it costs no compile slot, and
such proposals are few: the graph-neutral variants of one configuration). With one graph parked, a proposal of
another compiled in its own trial, the GPU idle: in one GPT-2 sweep four proposals did so right
after another graph was parked (23-28 s each, 100 s of the search's 133 s of compiling), and ResNet-50's winner
(fp16, reduce-overhead, batch 512) compiled 39.8 s in its trial while a batch-256 graph was parked (the search
compiled 39% of its trial time, 32% without that). So a second graph parks too, and a third (see the end); a
proposal of a fourth is measured in its own trial.

The expert's two trials are the exception: the informed start's twin
(:func:`autotune.sweep.proposals.expert_choice.informed_twin`), queued right after it, parks beside it though its graph
differs (while they are parked a sampler's proposal parks only with one of their graphs; one of another is measured).
Both graphs compile ahead while the default runs, and neither is a sampler's draw in a poor region. Measured at
once, the twin made the informed start wait for the rest of its compile first (it would outlast it), the GPU idle:
42.8 s of ResNet-50's on an H100, 13.5 s of GPT-2's.

The informed start does not wait behind a long trial. Without this rule, on GPT-2 it stood aside with about 10 s of
its compile left, and the sampler's first draw, fp32 eager at batch 64, ran 59 s meanwhile: not pruned, since
nothing better than the default was known yet, and the sweep's best came about 48 s late. The informed start is the
likeliest best before anything else is measured, and its figure is the pruning bar that keeps the trials after it
short. So a proposal predicted to outlast the rest of its compile by a margin (:data:`OUTLAST_FACTOR`; the
predictions are :meth:`autotune.search.costmodel.CostModel.seconds`, the cost-aware sampler's, each at least the run
of an eager full-precision trial at its batch, :func:`autotune.search.eagerrun.eager_run_s`: with only the default
measured the cost model priced GPT-2's fp32 eager draw at 4x its batch at the default's 20 s, and it ran 58.6 s) is
measured after it, and it waits for what is left of that compile (:meth:`Parking.outlasts`); a
cheaper one runs meanwhile, as ResNet-50's eager trials (5-7 s each, predicted 5-14 s) did during its informed
start's 45 s compile. A trial the sampler proposed stands aside whatever runs meanwhile: on GPT-2
measuring such trials first left the GPU idle for the rest of their compiles, 47 s in all in a 6-minute search, and
two of those five trials were then pruned.

A proposal that cannot park (a graph too many) and whose graph is still compiling ahead would wait for the rest of
that compile, the GPU idle, while a parked trial's compile may end sooner. In a ResNet-50 search on an H200
trial 15 waited 40.8 s for a compile ahead started 3 s before it was proposed, while trial 11's,
started 19 s before, had about 26 s left. So the parked trials whose compiles are predicted to end before the
proposal's are measured first, the soonest first (:meth:`Parking.sooner`); the proposal then waits only for what is
left. That still idles the GPU for the rest of the soonest compile (about 26 s there, an estimate from the
timestamps), and in another ResNet-50 search on an H200 the third graph, default precision
`reduce-overhead` at batch 64, was not compiling ahead: it compiled in its trial for 41.7 s (44 s of the search's
249 s of trial time), then was pruned at warm-up, while two graphs stood aside. Either way a third graph cost about
40 s of an idle GPU, in each of the two searches. So a third graph parks (:data:`SAMPLER_GRAPHS`), where the host
has the slots: at most the compile slots but one, so one stays for the search's next graph (a 16-core host has four;
one graph parks where the host has two). The risk is the one above: the sampler learns nothing from parked
trials and may propose more of their region meanwhile; in these two searches such proposals were pruned in 6 s each
from the cache, so the GPU seconds at stake are the third graph's compile. With three, a ResNet-50 search
(another H200, one run) parked three default-precision graphs together, measured the fourth after the soonest of
them (a 6.5 s wait), compiled 34.6% of its trial time and pruned 9.1%.

A graph too many whose compile is not running ahead compiled in its trial, the GPU idle, while the parked trials'
compiles ended beside it: in a GPT-2 search on an H200 trial 14, a fourth graph proposed
while three stood aside, compiled 25.9 s in its trial, and the three parked trials were measured right after it
(26 s of the search's 100 s of compiling, 243 s of trial time). So such a proposal has its compile started ahead
where a slot can be had and a parked trial is predicted to be ready before that compile would end
(:meth:`Parking.compile_beside`); the parked trials then go first, the soonest first (:meth:`Parking.sooner`), and
the proposal waits for what is left, counted as its compile. It is not parked: the sampler proposes nothing more
until it is measured, so no more graphs stand aside unmeasured than before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import optuna

from autotune.records import schema
from autotune.search.costmodel import Seconds, graph_key
from autotune.storage.rdb import heartbeat
from autotune.sweep.proposals.compile_ahead import CompileAhead
from autotune.sweep.proposals.proposer import Proposal
from autotune.sweep.workers.interrupted_trials import record_interrupted
from autotune.views.progress import Progress

__all__ = ["OUTLAST_FACTOR", "SAMPLER_GRAPHS", "Parked", "Parking", "Predict", "taken_up"]

# Configurations -> the predicted seconds of a trial of each, with the part waiting for a compile ahead; None where
# nothing is predicted (the cost-aware sampler's: autotune.search.costaware.CostAwareSampler.seconds).
Predict = Callable[[Sequence[Mapping[str, Any]]], Seconds | None]
# How many graphs the sampler's proposals park at once (see the module docstring): one per compile slot (four on an
# H100's 16-core host) let TPE's proposals of one poor region pile up unmeasured; one left the next new graph
# compiling in its trial, and two a third (about 40 s each in two H200 searches). At most the compile slots but
# one, so a slot stays for the search's next graph (a host of 8 cores has two): a guess's, or a graph too many's
# (Parking.compile_beside).
SAMPLER_GRAPHS = 3
# How much longer than the rest of the informed start's compile a proposal must be predicted to take before the
# informed start is measured first: its wait idles the GPU for certain, and a prediction barely above it is within the
# cost model's error. Chosen on the four cases measured on an H100 without the eager-run floor of
# autotune.search.eagerrun: GPT-2's first draw, fp32 eager at batch 64, predicted at 2.0x the rest, ran 59 s
# meanwhile; predicted at 1.4x, it ran after the informed start and was pruned in 5.6 s. ResNet-50's trial 3,
# predicted at 1.07x, ran after it (the informed start waiting 17.9 s, the GPU idle) and took 1.6 s; one predicted at
# 0.83x took 7 s meanwhile. With the floor GPT-2's draw was predicted at 55 s against 17 s left.
OUTLAST_FACTOR = 1.25


def taken_up(trial: optuna.trial.Trial) -> None:
    """``trial``, asked and standing aside since (RUNNING, not measured), is measured from now: its record starts
    here (schema.ATTR_PARKED_S, on Optuna's clock, so it starts where the trials measured meanwhile ended)."""
    asked = trial.datetime_start
    if asked is not None:
        trial.set_user_attr(schema.ATTR_PARKED_S, (datetime.now() - asked).total_seconds())


@dataclass
class Parked:
    """A proposal standing aside until its graph's compile ahead ends; its progress-line label; whether it is the
    informed start (a longer proposal is measured after it, :meth:`Parking.outlasts`) or its twin."""

    proposal: Proposal
    label: str
    informed: bool = False
    twin: bool = False
    beat: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)  # its heartbeat while parked

    @property
    def expert(self) -> bool:
        """The informed start or its twin: they park together (:meth:`Parking._beside`)."""
        return self.informed or self.twin


class Parking:
    """The trials one worker parked while their graphs compile ahead (see the module docstring)."""

    def __init__(
        self,
        ahead: CompileAhead,
        study: optuna.Study,
        storage: optuna.storages.BaseStorage,
        progress: Progress,
        predict: Predict,
    ) -> None:
        self.ahead = ahead
        self.study = study
        self.storage = storage
        self.progress = progress
        self.predict = predict
        self.parked: list[Parked] = []  # in the order parked (module docstring)

    def park(
        self, proposal: Proposal, label: str, compiled_graphs: set[str], informed: bool = False, twin: bool = False
    ) -> bool:
        """Park ``proposal`` if its graph would be compiled, or waited for, in its trial and a compile ahead can take
        it, and it may stand beside the trials parked already (:meth:`_beside`). ``compiled_graphs``: the graph keys
        trials compiled; ``informed``, ``twin``: it is the informed start, its twin. True when parked, False to measure
        it now."""
        if not self._beside(proposal, informed or twin):
            return False
        if not self.ahead.claim(proposal.params, compiled_graphs):
            return False
        parked = Parked(proposal, label, informed, twin)
        parked.beat.enter_context(heartbeat(self.storage, proposal.trial._trial_id))
        self.parked.append(parked)
        self.progress.message(
            f"trial {proposal.trial.number} steps aside until its graph is compiled ahead; other trials run meanwhile"
        )
        return True

    def _beside(self, proposal: Proposal, expert: bool) -> bool:
        """Whether ``proposal`` may park beside the trials parked now: none is, one of them has its graph, it and all
        of them are the expert's, or it and all of them are the sampler's, of fewer than :data:`SAMPLER_GRAPHS`
        graphs and fewer than the compile slots but one (at least one graph; see the module docstring)."""
        if not self.parked:
            return True
        graphs = {graph_key(parked.proposal.params) for parked in self.parked}
        if graph_key(proposal.params) in graphs:
            return True
        if expert:
            return all(parked.expert for parked in self.parked)
        limit = min(SAMPLER_GRAPHS, max(1, self.ahead.slots - 1))
        return not any(parked.expert for parked in self.parked) and len(graphs) < limit

    def outlasts(self, proposal: Proposal) -> bool:
        """Whether ``proposal``, not parked, is predicted to take :data:`OUTLAST_FACTOR` times longer than the parked
        informed start's compile has left (see the module docstring): the parked trials are then measured first.
        False when the informed start is not parked (measured already: its figure is the pruning bar), or nothing is
        predicted."""
        informed = next((parked for parked in self.parked if parked.informed), None)
        if informed is None:
            return False
        predicted = self.predict([proposal.params, informed.proposal.params])
        if predicted is None or predicted.trial[0] <= OUTLAST_FACTOR * predicted.waiting[1]:
            return False
        parked = ", ".join(str(p.proposal.trial.number) for p in self.parked)
        self.progress.message(
            f"trial {proposal.trial.number} runs after parked {parked}: predicted {predicted.trial[0]:.0f} s, "
            f"more than the {predicted.waiting[1]:.0f} s its graph's compile ahead is predicted to have left"
        )
        return True

    def compile_beside(self, proposal: Proposal, compiled_graphs: set[str]) -> bool:
        """Start the compile ahead of ``proposal``'s graph, a proposal that cannot park (:meth:`park` said no), where
        its trial would compile that graph, a compile slot can take it, and a parked trial is predicted to be ready
        (its compile ahead ended) before that compile would end: the GPU then measures the parked trials while the
        graph compiles (:meth:`sooner`; see the module docstring). ``compiled_graphs``: the graph keys trials compiled.
        True when started. Nothing is started where nothing is predicted or no parked trial would be ready before the
        proposal's whole trial would end; a compile started where none is ready before it would end is stopped again
        (:meth:`~autotune.sweep.proposals.compile_ahead.CompileAhead.drop`); the proposal then compiles in its trial, as
        before."""
        key = graph_key(proposal.params)
        if key is None or key in compiled_graphs or not self.parked or not self.ahead.ended(proposal.params):
            return False  # no compile, nothing to measure meanwhile, or one runs ahead already (sooner() takes it)
        configurations = [proposal.params, *(parked.proposal.params for parked in self.parked)]
        before = self.predict(configurations)  # no parked trial ready before its whole trial would end: no gain
        if before is None or float(min(before.waiting[1:])) >= float(before.trial[0]):
            return False
        if not self.ahead.claim(proposal.params, compiled_graphs):
            return False  # compiled ahead already, or no slot is free of a trial's compile
        # Started, its compile's rest is predicted as the wait its trial would have: sooner()'s test. Where it fails
        # (the soonest parked trial is ready after this compile would end, before its run would: a band of one
        # trial's run), the guess that claim() may have stopped to make room is lost with it, a guess the sampler's
        # proposal had just passed over.
        if self._soonest_before(proposal) is None:
            self.ahead.drop(proposal.params)
            return False
        self.progress.message(
            f"trial {proposal.trial.number} compiles ahead while the trials standing aside are measured (it cannot "
            "stand aside beside them)"
        )
        return True

    def sooner(self, proposal: Proposal) -> Parked | None:
        """The parked trial whose graph's compile ahead is predicted to end first, taken up to be measured before
        ``proposal`` (it waits for what is left of its own compile, if anything), where that is sooner than the end of
        the compile ahead ``proposal`` would wait for (see the module docstring). None where ``proposal`` would not
        wait (its graph is not compiling ahead), nothing is parked, or nothing is predicted."""
        if not self.parked or self.ahead.ended(proposal.params):
            return None
        found = self._soonest_before(proposal)
        if found is None:
            return None
        index, theirs, own = found
        parked = self.parked.pop(index)
        self.progress.message(
            f"trial {proposal.trial.number} waits for trial {parked.proposal.trial.number} first: its graph's compile "
            f"ahead is predicted to end in {theirs:.0f} s, this one's in {own:.0f} s"
        )
        return self._taken(parked)

    def _soonest_before(self, proposal: Proposal) -> tuple[int, float, float] | None:
        """The parked trial whose compile ahead is predicted to end first, where that is before the end of the one
        ``proposal``'s trial would wait for: its index, its predicted wait and ``proposal``'s; None where none is,
        or nothing is predicted."""
        waits = self._waits([proposal.params, *(parked.proposal.params for parked in self.parked)])
        if waits is None:
            return None
        own, theirs = waits[0], waits[1:]
        soonest = _soonest(theirs)
        return (soonest, theirs[soonest], own) if theirs[soonest] < own else None

    def take(self, waiting: bool = False) -> Parked | None:
        """The first parked trial whose graph's compile ahead has ended, taken up; with ``waiting`` the one whose
        compile is predicted to end first if none has (the longest parked where nothing is predicted): its trial then
        waits for what is left of that compile. None when none is parked, or every parked trial's compile still runs.
        """
        ready = next((i for i, p in enumerate(self.parked) if self.ahead.ended(p.proposal.params)), None)
        if ready is None and waiting and self.parked:
            waits = self._waits([parked.proposal.params for parked in self.parked])
            ready = 0 if waits is None else _soonest(waits)
        if ready is None:
            return None
        return self._taken(self.parked.pop(ready))

    def _waits(self, configurations: Sequence[Mapping[str, Any]]) -> list[float] | None:
        """The predicted rest of the compile ahead each configuration's trial would wait for (0 where none runs);
        None where nothing is predicted."""
        predicted = self.predict(configurations)
        return None if predicted is None else [float(wait) for wait in predicted.waiting]

    @staticmethod
    def _taken(parked: Parked) -> Parked:
        parked.beat.close()  # the measurement beats for it from here
        taken_up(parked.proposal.trial)
        return parked

    def release(self, cause: str) -> None:
        """Record the parked trials as interrupted by ``cause`` and queue their configurations again (a resumed sweep
        measures them first): the search cannot measure them."""
        released, self.parked = self.parked, []
        for parked in released:
            parked.beat.close()
            # On the way out of a failing sweep: a storage that fails here must not hide what ended it, and a trial
            # left RUNNING is retried as an orphan by the next sweep on the study
            # (autotune.sweep.workers.orphaned_trials).
            with contextlib.suppress(Exception):
                record_interrupted(self.study, parked.proposal.trial, cause, queue_again=True)


def _soonest(waits: Sequence[float]) -> int:
    """The index of the least predicted wait (the first of equals: the longest parked)."""
    return min(range(len(waits)), key=waits.__getitem__)
