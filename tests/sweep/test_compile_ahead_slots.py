"""The compile ahead's slots (autotune.sweep.proposals.compile_ahead.CompileAhead), with real processes standing in for
the compiles: a claim starts one where a slot is free of a trial's compile, and a dropped claim's process is stopped."""

from __future__ import annotations

import io
import time
from typing import Any

from autotune.search.costmodel import graph_key
from autotune.sweep.proposals.compile_ahead import CompileAhead
from autotune.trial_process import Running, TrialRunner
from autotune.views.progress import Progress


class SleepingRunner(TrialRunner):
    """Each compile ahead is a process that sleeps: it ends only when stopped."""

    def __init__(self) -> None:
        super().__init__(compiles=False)
        self.started: list[Running] = []

    def compile_ahead(self, spec: Any) -> Running:  # the stand-in compiles nothing
        running = self.start(time.sleep, (120,))
        self.started.append(running)
        return running


class Executor:
    """What CompileAhead needs of a TrialExecutor: its runner, and a trial's spec (the params themselves here)."""

    def __init__(self) -> None:
        self.runner = SleepingRunner()

    def spec(self, params: dict[str, Any]) -> dict[str, Any]:
        return params


GRAPHS = [{"precision": "fp16", "compile_mode": "default", "batch_size": b} for b in (16, 32, 64)]


def compile_ahead(slots: int) -> tuple[CompileAhead, SleepingRunner]:
    executor = Executor()
    ahead = CompileAhead(
        executor,  # type: ignore[arg-type]
        GRAPHS,
        lambda configurations: None,  # no scores: nothing starts but what is claimed
        Progress(None, None, io.StringIO()),
        timeout_s=60,
        slots=slots,
    )
    return ahead, executor.runner


def test_a_dropped_claim_stops_its_compile_and_frees_its_slot() -> None:
    ahead, runner = compile_ahead(slots=1)
    try:
        assert ahead.claim(GRAPHS[0], set())
        assert not ahead.ended(GRAPHS[0])
        assert not ahead.claim(GRAPHS[1], set())  # the one slot holds a trial's compile: never stopped for another
        ahead.drop(GRAPHS[0])
        assert ahead.ended(GRAPHS[0]) and runner.started[0].outcome is not None  # killed, not left running
        assert graph_key(GRAPHS[0]) not in ahead.done  # not a compile that ended: it may start again
        ahead.drop(GRAPHS[2])  # none runs: nothing to do
        assert ahead.claim(GRAPHS[1], set())  # its slot is free again
        assert not ahead.claim(GRAPHS[2], {str(graph_key(GRAPHS[2]))})  # a trial compiled it: no compile ahead
    finally:
        ahead.stop()
