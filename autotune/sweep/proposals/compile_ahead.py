"""Compile ahead: while the GPU measures one trial, the idle CPU compiles the graph the search will want next.

A sweep on one GPU waits for the compiler: on an H100, 9 of a ResNet-50 sweep's 20 trials compiled and spent 59% of
the trial time doing so, nearly all of it tracing and Inductor's code generation in one Python thread, while the
GPU sat idle and the host's other cores too. So while a trial runs, this worker keeps one compile going in the
background (:mod:`autotune.trial.ahead`: the configuration's graphs compiled into the study's cache, not run):

- which graph: among the space's configurations whose graph no trial has compiled and none is compiling, and which
  the proposer would run (not an attention kernel that a trial found cannot run this model in that precision:
  :func:`~autotune.sweep.proposals.proposer.would_reject`), the one the cost-aware sampler scores best
  (:meth:`~autotune.search.costaware.CostAwareSampler.score`: expected improvement per predicted second), so the
  compile goes where the search is heading. Only a space that can be listed and a sampler that scores
  configurations take part; otherwise nothing is compiled ahead. While the default trial runs nothing is scored
  yet, and the next trial is the informed start: its likely graphs are compiled then
  (:meth:`CompileAhead.speculate`, :func:`autotune.sweep.proposals.expert_choice.likely_starts`);
- what the search then knows: the sampler prices those graphs as compiled (a trial of one costs a compile from
  the cache), as it prices the graphs trials compiled, and a graph still compiling at the rest of its compile
  (the predicted fresh compile less the seconds it has run) plus a repeat: that is what they cost now, so the
  search measures something else while a graph compiles unless it is worth the wait;
- what a trial whose graph is still being compiled ahead does: it steps aside while other trials are measured
  (:mod:`autotune.sweep.proposals.parked_trials`, which :meth:`CompileAhead.claim` serves: the trials of up to three
  graphs at a time, and a graph too many while parked trials are measured); where it cannot, it waits for that compile
  to end rather than start the same compile again, and the wait counts as its compile (``compile_ahead_wait_s``, part of
  its ``compile_s``: the GPU was idle), so the sweep's figures stay honest; a trial whose graph was compiled ahead
  records how long that took (``compiled_ahead_s``), which the cost model reads as the graph's fresh compile.

One compile per 4 cores at a time (:func:`slots`: four on a 16-core host, each for the next best graph), at low CPU
priority and with half the cores for kernel builds, so the trial being measured keeps what it needs; they are
stopped when the search ends (the finishing stages run alone). A failed compile ahead
costs nothing but the idle CPU's time: the trial compiles as before and meets the failure itself.

GPU memory is shared too: each compile ahead holds the CUDA context, the model's parameters and a batch while it
compiles. Four compiles ahead of a 2.0B-parameter Llama (fp32 weights) held 9.5 GiB each of an H200, and two of its
trials ran out of memory beside them, short by less than the compiles held (15.7 GiB asked, 6.4 GiB free, 19-38 GiB
held by compiles ahead). So:

- fewer run at once where the model is large: a compile ahead answers how much of the GPU it held
  (:mod:`autotune.trial.ahead`), and from then on no more run at once than fit in :data:`AHEAD_GPU_SHARE` of the GPU
  (:func:`memory_slots`; at least one). The first compiles, started before any has answered, are counted by cores;
- a trial that ran out of memory while compiles ahead ran is not the configuration's failure until measured alone
  (:func:`measure_alone`): the compiles no trial waits for are stopped, those a parked trial waits for are let finish
  (:meth:`CompileAhead.make_way`), and the trial is measured once more with none beside it; only that measurement is
  recorded (the first one's GPU time stays in the trial's duration). Compiles ahead start again at the next trial.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.measurement import AHEAD_METRIC, AHEAD_WAIT_METRIC, Status, TrialResult
from autotune.search.costmodel import graph_key
from autotune.search.samplerview import OrdinalView
from autotune.space.configurations import list_configurations
from autotune.sweep.context import SweepContext
from autotune.sweep.measurers import TrialExecutor
from autotune.sweep.options import Executor, Role
from autotune.sweep.proposals.proposer import would_reject
from autotune.trial_process import Running
from autotune.views.progress import Progress

__all__ = [
    "AHEAD_GPU_SHARE",
    "CPUS_PER_COMPILE",
    "MIN_CPUS",
    "CompileAhead",
    "Compiled",
    "compile_ahead_for",
    "measure_alone",
    "memory_slots",
    "slots",
    "wanted",
]

# Fewer cores than this and the compile ahead would take the measured trial's: off by default (--compile-ahead
# turns it on anyway).
MIN_CPUS = 8
# Cores per compile ahead running at once: a compile is mostly one Python thread (tracing, Inductor's code
# generation) with bursts of kernel builds. On an H100 host of 16 cores two compiles ahead beside a compiled ResNet-50
# trial left its throughput as it was (+0.12%, BENCHMARKS.md), and two could not keep up with the search (GPT-2's
# trials waited 23-25 s for compiles ahead started a trial before): four there. With four, GPT-2's search compiled
# 23% of its trial time (37% with two); ResNet-50's compiles ahead each took longer (48-56 s against 42-49 s), and
# its search still compiled 57% of the time (49% with two, one run each): not settled.
CPUS_PER_COMPILE = 4
# The share of the GPU's memory that the compiles ahead running at once may hold together (memory_slots). A guess, not
# measured: small beside what a trial needs (the job itself gives up under ahead.MIN_FREE_SHARE free), large enough
# that a small model's compiles ahead (a ResNet-50's parameters are about 0.1 GiB) keep every slot the cores allow.
AHEAD_GPU_SHARE = 0.1
Score = Callable[[Sequence[Mapping[str, Any]]], Any]  # configurations -> their scores (None: cannot score yet)


def wanted(choice: bool | None, device: str, workers: int) -> bool:
    """Whether a sweep compiles ahead: as ``--compile-ahead``/``--no-compile-ahead`` says, else on a GPU sweep of
    one worker on a host with at least :data:`MIN_CPUS` cores (several workers share the host's CPU already)."""
    if choice is not None:
        return choice
    return device.startswith("cuda") and workers <= 1 and (os.cpu_count() or 1) >= MIN_CPUS


def slots() -> int:
    """How many compiles ahead run at once on this host: one per :data:`CPUS_PER_COMPILE` cores, at least one."""
    return max(1, (os.cpu_count() or 1) // CPUS_PER_COMPILE)


def memory_slots(held_gib: float, gpu_gib: float) -> int | None:
    """How many compiles ahead may run at once where one holds ``held_gib`` of a GPU of ``gpu_gib``: as many as fit
    in :data:`AHEAD_GPU_SHARE` of it, at least one (compiling ahead saves most of a sweep's compile time on the GPU,
    and a trial that runs out of memory beside it is measured again alone: :func:`measure_alone`). None: no limit
    (nothing held is known, or a CPU)."""
    if held_gib <= 0 or gpu_gib <= 0:
        return None
    return max(1, int(AHEAD_GPU_SHARE * gpu_gib / held_gib))


def measure_alone(result: TrialResult, compiles_beside: int) -> bool:
    """Whether a trial's ``result`` says nothing of its configuration until it is measured again with no compile
    ahead beside it: it ran out of memory while ``compiles_beside`` compiles ahead held some."""
    return result.status is Status.OOM and compiles_beside > 0


@dataclass(frozen=True)
class Compiled:
    """One graph compiled ahead: the configuration it was compiled for, how it ended and how long it took."""

    params: dict[str, Any]
    ok: bool
    seconds: float
    reason: str | None = None


@dataclass
class _Compiling:
    key: str
    params: dict[str, Any]
    running: Running
    started: float
    # a trial waits for it, parked or not (autotune.sweep.proposals.parked_trials): never stopped to make room
    claimed: bool = False


class CompileAhead:
    """Keeps one compile ahead of the search running on the idle CPU (see the module docstring)."""

    def __init__(
        self,
        executor: TrialExecutor,
        configurations: Sequence[dict[str, Any]],
        score: Score,
        progress: Progress,
        timeout_s: float,
        slots: int = 1,
        rejecting: Callable[[], Callable[[Mapping[str, Any]], bool]] = lambda: _runs_everything,
    ) -> None:
        self.executor = executor
        # which configurations the proposer answers without a run, as the study stands: their graphs compile for nothing
        self.rejecting = rejecting
        # (graph key, configuration) of each compiled configuration: the keys are read at every trial
        self.configurations = [(key, c) for c in configurations if (key := graph_key(c)) is not None]
        self.score = score
        self.progress = progress
        self.timeout_s = timeout_s
        self.cpu_slots = slots  # compiles at a time that the host's cores allow
        self._held_gib = 0.0  # the most GPU memory one compile ahead held (0: none has said)
        self._gpu_gib = 0.0
        self.done: dict[str, Compiled] = {}  # graph key -> its compile ahead
        self._compiling: dict[str, _Compiling] = {}  # graph key -> its compile in progress
        self._accounted: set[str] = set()  # graphs compiled ahead whose first trial has run

    @property
    def slots(self) -> int:
        """Compiles ahead at a time: as the host's cores allow, fewer where they would hold more than
        :data:`AHEAD_GPU_SHARE` of the GPU (:func:`memory_slots`)."""
        by_memory = memory_slots(self._held_gib, self._gpu_gib)
        return self.cpu_slots if by_memory is None else min(self.cpu_slots, by_memory)

    def running(self) -> int:
        """How many compiles ahead are running now."""
        return len(self._compiling)

    def make_way(self) -> None:
        """Leave the GPU to the next trial alone: stop the compiles ahead no trial waits for (guesses the search may
        make again) and wait for those a parked trial waits for to end, since its trial would otherwise compile the
        whole graph itself later, the GPU idle. The next :meth:`before` starts compiles ahead again."""
        for compiling in [c for c in self._compiling.values() if not c.claimed]:
            self._stop(compiling)
        claimed = list(self._compiling.values())
        if len(claimed) == 1:
            self.progress.message("waiting for the compile ahead that a parked trial waits for")
        elif claimed:
            self.progress.message(f"waiting for the {len(claimed)} compiles ahead that parked trials wait for")
        for compiling in claimed:
            self._collect(compiling, self.timeout_s)

    def compiled(self) -> list[dict[str, Any]]:
        """The configurations whose graphs were compiled ahead, for the sampler to price as compiled."""
        return [c.params for c in self.done.values() if c.ok]

    def compiling(self) -> list[tuple[dict[str, Any], float]]:
        """The configurations whose graphs are being compiled ahead, each with the seconds its compile has run: the
        sampler prices a trial of one at the rest of that compile (its trial would wait for it)."""
        now = time.monotonic()
        return [(c.params, now - c.started) for c in self._compiling.values()]

    def before(self, params: Mapping[str, Any], compiled_graphs: set[str]) -> float:
        """Called when the trial of ``params`` is about to run: wait if its graph is being compiled ahead (returns the
        seconds waited), then start compiling the next graphs. ``compiled_graphs``: the graph keys trials compiled."""
        key = graph_key(params)
        waited = 0.0
        own = self._compiling.get(key) if key is not None else None
        if own is not None:
            started = time.monotonic()
            self.progress.message(f"waiting for the compile ahead of this trial's graph (started {_ago(own)})")
            self._collect(own, self.timeout_s)
            waited = time.monotonic() - started
        self.poll()
        self._start_next({key} | compiled_graphs if key is not None else compiled_graphs)
        return waited

    def claim(self, params: Mapping[str, Any], compiled_graphs: set[str]) -> bool:
        """See that the graph of ``params``, a trial that would otherwise compile it or wait for it, is compiled
        ahead (:mod:`autotune.sweep.proposals.parked_trials`): True when it is, already or from now on (in a free slot,
        or in place of the youngest compile no trial waits for); False when it needs no compile (``compiled_graphs``:
        the graph keys trials compiled) or cannot have one (compiled ahead already, or failed; every slot held for a
        trial)."""
        key = graph_key(params)
        if key is None or key in compiled_graphs:
            return False
        self.poll()
        if key not in self._compiling:
            if key in self.done or not self._room():
                return False
            self._start(key, dict(params))
        self._compiling[key].claimed = True
        return True

    def drop(self, params: Mapping[str, Any]) -> None:
        """Stop the compile ahead of the graph of ``params``, one :meth:`claim` has just started for a trial that will
        not wait for it after all (:meth:`autotune.sweep.proposals.parked_trials.Parking.compile_beside`); the slot is
        filled again at the next trial's :meth:`before`. Never for a parked trial's compile: that trial would read as
        ready."""
        key = graph_key(params)
        compiling = self._compiling.pop(key, None) if key is not None else None
        if compiling is not None:
            compiling.running.kill()

    def ended(self, params: Mapping[str, Any]) -> bool:
        """Whether no compile ahead of the graph of ``params`` is running now."""
        self.poll()
        return graph_key(params) not in self._compiling

    def poll(self) -> None:
        """Take in the compiles ahead that have ended."""
        for compiling in [c for c in self._compiling.values() if c.running.ready()]:
            self._collect(compiling, 0)

    def speculate(self, configurations: Sequence[Mapping[str, Any]], what: str) -> None:
        """Start compiling these configurations' graphs now, in the free slots, in the order given: the search's
        likely next ones before it can score any (the informed start, while the default trial runs), ``what`` they
        are in the progress line. A configuration outside the listed ones, or whose graph is done or compiling, is
        passed over."""
        listed = {key for key, _ in self.configurations}
        batches: list[str] = []
        first_precision = configurations[0].get("precision") if configurations else None
        for params in configurations:
            key = graph_key(params)
            if len(self._compiling) >= self.slots:
                break
            if key is not None and key in listed and key not in self.done and key not in self._compiling:
                self._start(key, dict(params))
                precision = params.get("precision")  # named where it differs from the first's (512, 512 fp16)
                suffix = f" {precision}" if precision != first_precision else ""
                batches.append(f"{params.get('batch_size', '-')}{suffix}")
        if batches:
            self.progress.message(f"compiling ahead, {what} (batch {', '.join(batches)})")

    def account(self, params: Mapping[str, Any], result: TrialResult, waited: float) -> None:
        """Note on ``result`` what compiling ahead did for its trial: the wait (GPU time: part of its compile, whether
        the compile ahead succeeded or not), and, for the first trial of a graph compiled ahead, that compile's
        seconds (later trials of the graph are repeats from the cache, as after a trial's own compile)."""
        if "compile_s" not in result.metrics:
            return  # a failed trial: nothing measured to add to
        if waited > 0:
            result.metrics[AHEAD_WAIT_METRIC] = waited
            result.metrics["compile_s"] = float(result.metrics["compile_s"]) + waited
        key = graph_key(params)
        if key is None or key in self._accounted:
            return
        compiled = self.done.get(key)
        if compiled is not None and compiled.ok:
            result.metrics[AHEAD_METRIC] = compiled.seconds
            self._accounted.add(key)

    def stop(self) -> None:
        """Stop the compiles in progress (the search has ended, or was interrupted)."""
        for compiling in self._compiling.values():
            compiling.running.kill()
        self._compiling.clear()

    def _start_next(self, skip: set[str]) -> None:
        if len(self._compiling) >= self.slots:
            return
        taken = skip | set(self.done) | set(self._compiling)
        rejected = self.rejecting()
        candidates = [(k, params) for k, params in self.configurations if k not in taken and not rejected(params)]
        if not candidates:
            return
        scores = self.score([params for _, params in candidates])
        if scores is None:
            return
        for index in sorted(range(len(candidates)), key=lambda i: -float(scores[i])):
            key, params = candidates[index]
            if key in self._compiling:
                continue  # another configuration of this graph was chosen already
            self._start(key, params)
            if len(self._compiling) >= self.slots:
                return

    def _room(self) -> bool:
        """A free slot, made where needed by stopping the youngest compiles no trial waits for (guesses: the search
        may pick them again later, and they then compile again); more than one where the slots shrank by memory."""
        while len(self._compiling) >= self.slots:
            guesses = [c for c in self._compiling.values() if not c.claimed]
            if not guesses:
                return False
            self._stop(max(guesses, key=lambda c: c.started))
        return True

    def _stop(self, compiling: _Compiling) -> None:
        """Kill a compile ahead no trial waits for (a guess: the search may pick its graph again, compiled again)."""
        compiling.running.kill()
        del self._compiling[compiling.key]

    def _start(self, key: str, params: dict[str, Any]) -> None:
        running = self.executor.runner.compile_ahead(self.executor.spec(params))
        self._compiling[key] = _Compiling(key, params, running, time.monotonic())

    def _collect(self, compiling: _Compiling, timeout_s: float) -> None:
        del self._compiling[compiling.key]
        outcome = compiling.running.wait(timeout_s)
        seconds = time.monotonic() - compiling.started
        value = outcome.value if isinstance(outcome.value, dict) else {}
        self._note_memory(value)
        if value.get("ok"):
            self.done[compiling.key] = Compiled(compiling.params, True, float(value.get("seconds", seconds)))
            return
        why = value.get("reason") or outcome.failure or ("timed out" if outcome.timed_out else "no answer")
        self.done[compiling.key] = Compiled(compiling.params, False, seconds, str(why))
        self.progress.message(f"compiling ahead failed ({why}); its trial, if it comes, compiles as before")

    def _note_memory(self, answer: Mapping[str, Any]) -> None:
        """Take in what a compile ahead held of the GPU (its answer's ``held_gib`` of ``gpu_gib``); say so where that
        leaves fewer slots than the cores allow."""
        held, gpu = float(answer.get("held_gib") or 0.0), float(answer.get("gpu_gib") or 0.0)
        if held <= self._held_gib or gpu <= 0:
            return
        before = self.slots
        self._held_gib, self._gpu_gib = held, gpu
        if self.slots < before:
            self.progress.message(
                f"a compile ahead held {held:.1f} GiB of the GPU's {gpu:.0f}: {self.slots} at a time from now on"
                f" (at most {AHEAD_GPU_SHARE:.0%} of its memory)"
            )


def _runs_everything(params: Mapping[str, Any]) -> bool:
    """A compile ahead told of no rejections: every configuration may be compiled."""
    return False


def _ago(compiling: _Compiling) -> str:
    return f"{time.monotonic() - compiling.started:.0f} s ago"


def compile_ahead_for(ctx: SweepContext, executor: Executor, role: Role) -> CompileAhead | None:
    """A compile ahead for this worker where it is wanted and can choose its graphs (a listed space, a sampler seen
    through :class:`~autotune.search.samplerview.OrdinalView` that scores configurations); None: none."""
    if not isinstance(executor, TrialExecutor) or not wanted(
        ctx.options.compile_ahead, executor.device, 1 if role == "all" else 2
    ):
        return None
    listed = list_configurations(ctx.space)
    sampler = ctx.study.sampler
    if listed is None or not isinstance(sampler, OrdinalView):
        return None
    study = ctx.study
    ahead = CompileAhead(
        executor,
        listed.feasible,
        lambda configurations: sampler.score(study, configurations),
        ctx.progress,
        ctx.space.budget.trial_timeout_s,
        slots(),
        lambda: would_reject(ctx.records),
    )
    return ahead if sampler.set_compiled_ahead(ahead.compiled, ahead.compiling) else None
