"""The winner's production start, rehearsed (real processes, Inductor on the CPU): the exported config started in a
fresh interpreter with empty compile caches loads the winner's artifacts, and what it saves is what export ships."""

from __future__ import annotations

import dataclasses
import hashlib
import io
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from recorded_studies import add_trial
from sweep_contexts import sweep_context

from autotune.measurement import Status, TrialResult
from autotune.records import StudyRecords
from autotune.space import load_space
from autotune.sweep import Sweep, SweepOptions
from autotune.sweep.context import SweepContext
from autotune.sweep.stages.rehearsal import Rehearse, rehearse
from autotune.trial.compilecache import study_cache_dir
from autotune.trial.pruning import Pruning
from autotune.tuned import artifacts as compileartifacts
from autotune.views.export import export
from autotune.views.progress import Progress

SPACE = """
workload: {name: "trial_workloads:tiny_mlp", preset: tiny}
device: cpu
objective: {metric: throughput, direction: maximize}
budget: {trials: 2, trial_timeout: 5m}
params:
  compile_mode: [none, default]
"""


def context(tmp_path: Path, said: io.StringIO) -> SweepContext:
    """A sweep's context over a new SQLite study of SPACE, its trials run in real processes."""
    return sweep_context(tmp_path, SPACE, said, "rehearse")


def with_compiled_winner(ctx: SweepContext) -> int:
    """A compiled trial, run for real (it saves its artifacts in the study's folder), recorded as the study's winner
    over an eager default made up to lose; its number."""
    result = ctx.executor({"compile_mode": "default"}, 300.0, None)
    assert result.ok and "compile_artifacts" in result.extra, (result.reason, result.warnings)
    metrics = {"throughput": 1.0, "throughput_unit": "samples/s", "step_ms_p50": 16_000.0}
    default = TrialResult(Status.OK, None, {"compile_mode": "none"}, metrics, dict(result.env))
    add_trial(ctx.study, ctx.info, default, default=True)
    result.metrics["throughput"] = 1e9
    number = add_trial(ctx.study, ctx.info, result)
    ctx.records.refresh()
    return number


@pytest.mark.slow
def test_the_winners_start_is_rehearsed_and_export_ships_what_it_saved(tmp_path: Path) -> None:
    said = io.StringIO()
    ctx = context(tmp_path, said)
    number = with_compiled_winner(ctx)
    own = ctx.records.trial(number).compile_artifacts
    assert own is not None

    Rehearse().run(ctx)
    lines = said.getvalue()
    assert f"rehearsing trial {number}'s production start: a fresh process, empty compile caches" in lines
    assert f"trial {number}'s production start, rehearsed: " in lines
    assert "what that start built and read ships" in lines
    winner = ctx.records.winner
    assert winner is not None and winner.number == number
    rehearsal = winner.start_rehearsal
    assert rehearsal is not None and rehearsal.ok and rehearsal.loaded, rehearsal
    assert rehearsal.of_sha256 == own["sha256"] and rehearsal.start_s is not None and rehearsal.load_s is not None
    shipped = winner.shipped_artifacts
    assert shipped is not None and shipped == rehearsal.artifacts
    cache = study_cache_dir(ctx.options.storage, ctx.study.study_name)
    saved = cache / compileartifacts.FOLDER / shipped["file"]
    assert hashlib.sha256(saved.read_bytes()).hexdigest() == shipped["sha256"]
    assert (cache / compileartifacts.FOLDER / own["file"]).exists()  # the trial's own are kept
    assert not list(cache.glob("rehearsal-*"))  # its config and empty caches were temporary folders
    # stored on the study: another process's records read it
    again = StudyRecords.read(optuna.load_study(study_name=ctx.study.study_name, storage=ctx.options.storage), ctx.info)
    assert again.trial(number).start_rehearsal == rehearsal

    target = tmp_path / "out" / "tuned.yaml"
    export(ctx.study, ctx.info, target, storage=ctx.options.storage, records=ctx.records)
    section = yaml.safe_load(target.read_text())["compile_artifacts"]
    assert section["sha256"] == shipped["sha256"] and section["trial"] == number
    assert (target.parent / section["file"]).read_bytes() == saved.read_bytes()

    before = said.getvalue()
    Rehearse().run(ctx)  # a resumed sweep: rehearsed already, not run again
    assert said.getvalue() == before


@pytest.mark.slow
def test_a_rehearsal_that_fails_leaves_the_trials_own_artifacts_shipping(tmp_path: Path) -> None:
    said = io.StringIO()
    ctx = context(tmp_path, said)
    number = with_compiled_winner(ctx)
    budget = dataclasses.replace(ctx.space.budget, trial_timeout_s=1.0)  # too short for any start
    Rehearse().run(dataclasses.replace(ctx, space=dataclasses.replace(ctx.space, budget=budget)))
    winner = ctx.records.trial(number)
    rehearsal = winner.start_rehearsal
    assert rehearsal is not None and not rehearsal.ok and rehearsal.artifacts is None, rehearsal
    assert winner.shipped_artifacts == winner.compile_artifacts
    assert f"trial {number}'s production start, rehearsed: it ended {rehearsal.status}" in said.getvalue()
    assert "its own compile artifacts ship" in said.getvalue()


def test_a_sweep_past_its_time_limit_or_without_the_artifacts_file_does_not_rehearse(tmp_path: Path) -> None:
    said = io.StringIO()
    ctx = context(tmp_path, said)
    metrics = {"throughput": 5.0, "throughput_unit": "samples/s", "step_ms_p50": 3.0, "compile_s": 9.0}
    compiled = TrialResult(Status.OK, None, {"compile_mode": "default"}, metrics, {"device": "cpu"})
    missing = {"file": "e" * 64 + ".bin", "sha256": "e" * 64, "bytes": 1, "env": {"torch": "2.13.0"}}
    compiled.extra["compile_artifacts"] = missing
    number = add_trial(ctx.study, ctx.info, compiled)
    ctx.records.refresh()
    Rehearse(deadline=0.0).run(ctx)  # nothing runs: the trial's artifacts file need not exist
    assert ctx.records.trial(number).rehearsed is None
    assert "not rehearsed: the sweep's time limit has passed (its own compile artifacts ship)" in said.getvalue()
    # Without a time limit, a winner whose artifacts file is gone is not started from scratch either; a killed
    # rehearsal's temporary folder is removed on the way
    cache = study_cache_dir(ctx.options.storage, ctx.study.study_name)
    (cache / "rehearsal-killed" / "triton").mkdir(parents=True)
    Rehearse().run(ctx)
    assert not list(cache.glob("rehearsal-*"))
    assert ctx.records.trial(number).rehearsed is None
    assert f"trial {number}'s production start not rehearsed: its compile artifacts are not in" in said.getvalue()


def test_a_sweep_rehearses_the_start_once_the_winner_is_settled_unless_told_not_to(tmp_path: Path) -> None:
    space_file = tmp_path / "rehearse.yaml"
    space_file.write_text(SPACE)
    space = load_space(space_file)

    def no_trial(params: dict[str, Any], timeout: float, pruning: Pruning | None) -> TrialResult:
        raise AssertionError("listing a sweep's stages runs no trial")

    def stages(**options: Any) -> list[str]:
        settings = SweepOptions(storage="memory", tracking=False, **options)
        sweep = Sweep(space, settings, no_trial, Progress(None, None, io.StringIO()))
        return [stage.name for stage in sweep._stages()]

    names = stages()
    assert names.index("rehearse the start") > max(i for i, name in enumerate(names) if name == "re-measure")
    assert names[-1] == "report"  # the report draws what the others measured
    assert "rehearse the start" not in stages(rehearse_start=False)


def test_a_start_that_fails_is_recorded_with_its_one_line_reason(tmp_path: Path) -> None:
    tuned = tmp_path / "config" / "tuned.yaml"
    tuned.parent.mkdir()
    workload = {"name": "no_such_module:workload", "preset": "tiny"}
    tuned.write_text(yaml.safe_dump({"schema_version": 1, "knobs": {"compile_mode": "default"}, "workload": workload}))
    cache = tmp_path / "cache"
    rehearsal = rehearse(tuned, cache / "compile-artifacts", "cpu", 120.0)
    assert rehearsal.status == "failed" and rehearsal.artifacts is None and not rehearsal.loaded, rehearsal
    assert rehearsal.reason is not None and rehearsal.reason.startswith("exit code 2: autotune: error: ")
    assert "no_such_module" in rehearsal.reason
    assert [p.name for p in cache.iterdir()] == ["compile-artifacts"]  # its temporary folder is gone
