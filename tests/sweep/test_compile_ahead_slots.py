"""The compile ahead's slots (autotune.sweep.proposals.compile_ahead.CompileAhead), with real processes standing in for
the compiles: a claim starts one where a slot is free of a trial's compile, and a dropped claim's process is stopped;
fewer slots where a compile ahead held much of the GPU; the way made for a trial measured again alone; no compile of a
graph the proposer would not run."""

from __future__ import annotations

import io
import time
from typing import Any

from autotune.measurement import Status, TrialResult
from autotune.search.costmodel import graph_key
from autotune.sweep.proposals.compile_ahead import AHEAD_GPU_SHARE, CompileAhead, measure_alone, memory_slots
from autotune.trial_process import Running, TrialRunner
from autotune.views.progress import Progress


class SleepingRunner(TrialRunner):
    """Each compile ahead is a process that sleeps ``seconds``: by default it ends only when stopped."""

    def __init__(self) -> None:
        super().__init__(compiles=False)
        self.started: list[Running] = []
        self.seconds = 120.0

    def compile_ahead(self, spec: Any) -> Running:  # the stand-in compiles nothing
        running = self.start(time.sleep, (self.seconds,))
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


def test_only_an_oom_beside_compiles_ahead_is_measured_again_alone() -> None:
    oom = TrialResult.failed(Status.OOM, "OutOfMemoryError: CUDA out of memory", {})
    assert measure_alone(oom, compiles_beside=2)
    assert not measure_alone(oom, compiles_beside=0)  # alone already: the configuration's own
    assert not measure_alone(TrialResult.failed(Status.CRASH, "killed by signal SIGSEGV", {}), compiles_beside=2)
    assert not measure_alone(TrialResult(Status.OK), compiles_beside=2)


def test_compiles_ahead_at_once_fit_in_a_small_share_of_the_gpu() -> None:
    assert memory_slots(9.54, 140.0) == 1  # a 2.0B-parameter model's fp32 weights and batch on an H200
    assert memory_slots(0.6, 140.0) == int(AHEAD_GPU_SHARE * 140.0 / 0.6)  # a small model: the cores decide
    assert memory_slots(40.0, 140.0) == 1  # more than the share alone: one still compiles ahead
    assert memory_slots(0.0, 0.0) is None  # nothing said (a CPU): no limit


class AnsweringRunner(TrialRunner):
    """Each compile ahead is a process that answers at once that it held ``held_gib`` of a GPU of ``gpu_gib``."""

    def __init__(self, held_gib: float, gpu_gib: float) -> None:
        super().__init__(compiles=False)
        self.answer = [("ok", True), ("seconds", 1.0), ("held_gib", held_gib), ("gpu_gib", gpu_gib)]

    def compile_ahead(self, spec: Any) -> Running:
        return self.start(dict, (self.answer,))


def test_a_compile_ahead_that_held_much_of_the_gpu_leaves_fewer_slots() -> None:
    said = io.StringIO()
    executor = Executor()
    executor.runner = AnsweringRunner(held_gib=9.5, gpu_gib=140.0)  # type: ignore[assignment]
    ahead = CompileAhead(
        executor,  # type: ignore[arg-type]
        GRAPHS,
        lambda configurations: None,
        Progress(None, None, said),
        timeout_s=60,
        slots=4,
    )
    assert ahead.slots == 4  # nothing answered yet: the cores decide
    assert ahead.claim(GRAPHS[0], set())
    while not ahead.ended(GRAPHS[0]):
        time.sleep(0.05)
    assert ahead.slots == 1
    assert "a compile ahead held 9.5 GiB of the GPU's 140: 1 at a time from now on (at most 10% of its memory)" in (
        said.getvalue()
    )


def test_making_way_stops_the_guesses_and_lets_a_parked_trials_compile_end() -> None:
    ahead, runner = compile_ahead(slots=2)
    try:
        ahead.speculate([GRAPHS[1]], "a guess")  # sleeps until stopped
        runner.seconds = 1.0  # the parked trial's compile ends by itself
        assert ahead.claim(GRAPHS[0], set())
        assert ahead.running() == 2
        ahead.make_way()
        assert ahead.running() == 0
        guess, claimed = runner.started
        assert guess.outcome is not None and guess.outcome.failure == "killed"
        assert claimed.outcome is not None and claimed.outcome.failure is None  # ended, not stopped
        assert graph_key(GRAPHS[0]) in ahead.done and graph_key(GRAPHS[1]) not in ahead.done
    finally:
        ahead.stop()


def test_a_graph_the_proposer_would_answer_without_a_run_is_not_compiled_ahead() -> None:
    flash = {"precision": "fp32", "compile_mode": "default", "attention_backend": "flash", "batch_size": 16}
    configurations = [flash, {**flash, "precision": "bf16"}, {**flash, "attention_backend": "auto"}]
    executor = Executor()
    ahead = CompileAhead(
        executor,  # type: ignore[arg-type]
        configurations,
        lambda listed: [3.0 if c["precision"] == "fp32" else 1.0 for c in listed],  # the rejected one scores best
        Progress(None, None, io.StringIO()),
        timeout_s=60,
        slots=1,
        rejecting=lambda: lambda params: params["attention_backend"] == "flash" and params["precision"] == "fp32",
    )
    try:
        ahead.before(configurations[2], set())  # a trial is measured: the idle slot compiles the next best graph
        assert [params for params, _ in ahead.compiling()] == [configurations[1]]
    finally:
        ahead.stop()
