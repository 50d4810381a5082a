"""The finalists stage: the search's best compiled configurations re-tried with Inductor options, in real trial
processes; the finalist ranks, exports with its options, and is not run again by a resumed sweep."""

from __future__ import annotations

import json
import time
from pathlib import Path

import optuna
import pytest
import yaml
from finalist_workloads import WATCHED

from autotune.records import TrialKind, schema
from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.sweep.stages.summary import summary_text
from autotune.views.export import export
from autotune.views.leaderboard import leaderboard
from autotune.views.progress import Progress

OPTIONS = {"coordinate_descent_tuning": True, "epilogue_fusion": False}
SPACE = """\
workload: {{name: "finalist_workloads:inductor_witness", preset: tiny, args: {{record: "{record}"}}}}
device: cpu
budget: {{trials: {trials}, {limits}}}
sampler: {{name: grid}}
params:
  compile_mode: [{modes}]
finalists:
  top: 2   # the eager default is passed over: the options change nothing there
  inductor: {{coordinate_descent_tuning: true, epilogue_fusion: false}}{finalist_mode}
"""


def sweep(
    tmp_path: Path,
    limits: str = "trial_timeout: 5m",
    modes: str = "none, default",
    finalist_mode: str = "",
    trials: int = 2,
    with_finalists: bool = True,
    deadline: float | None = None,
) -> tuple[optuna.Study, str]:
    space = tmp_path / "witness.yaml"
    finalists = f"\n  compile_mode: {finalist_mode}" if finalist_mode else ""
    text = SPACE.format(
        record=tmp_path / "compiles.jsonl", limits=limits, modes=modes, finalist_mode=finalists, trials=trials
    )
    space.write_text(text if with_finalists else text[: text.index("finalists:")])
    storage = f"sqlite:///{tmp_path}/study.db"
    options = SweepOptions(
        report=False, storage=storage, tracking=False, remeasure_top=1, remeasure_repeats=1, deadline=deadline
    )
    log = tmp_path / "progress.log"
    with log.open("a") as stream:
        summary = run_sweep(load_space(space), options, Progress(None, None, stream))
    text = log.read_text() + summary_text(summary, storage)
    return optuna.load_study(study_name="witness", storage=storage), text


def compiles(tmp_path: Path) -> list[dict[str, object]]:
    """What each compiled graph saw of Inductor's config, as the workload recorded it."""
    return [json.loads(line) for line in (tmp_path / "compiles.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_finalist_runs_with_the_options_ranks_exports_them_and_is_not_run_again(tmp_path: Path) -> None:
    study, text = sweep(tmp_path)
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 3
    finalist = trials[2]
    assert (
        finalist.user_attrs[schema.ATTR_FINALIST_OF] == 1
    )  # the compiled search trial; the eager default is passed over
    assert (
        finalist.user_attrs[schema.ATTR_KIND] == TrialKind.MEASURED
        and finalist.state is optuna.trial.TrialState.COMPLETE
    )
    assert finalist.user_attrs[schema.ATTR_PARAMS] == {
        "compile_mode": "default",
        "inductor": "coordinate_descent_tuning=true;epilogue_fusion=false",
    }
    # Inductor compiled the finalist's graphs (forward, backward) under the options: in the finalist's process
    # and in its re-measurement's (it ranks first, so it is re-measured); every other compile under its defaults.
    seen = compiles(tmp_path)
    tuned = [c for c in seen if all(c[name] == value for name, value in OPTIONS.items())]
    assert len(tuned) == 4 and len({c["pid"] for c in tuned}) == 2
    untuned = [{name: c[name] for name in WATCHED} for c in seen if c not in tuned]
    assert untuned and all(c == {"coordinate_descent_tuning": False, "epilogue_fusion": True} for c in untuned)

    info = schema.load_study_info(study)
    assert info is not None
    winner = next(r for r in leaderboard(study, info) if r.rank == 1)
    assert winner.trial == 2  # the witness steps fast only when compiled with the options: the finalist wins
    assert winner.remeasured is not None and len(winner.remeasured["values"]) == 1  # ranked by its median
    assert "finalist trial 2: trial 1 again with inductor coordinate_descent_tuning=true;epilogue_fusion=false" in text
    assert "trial time" in text and "compiling" in text  # the summary's account of compile time

    tuned_yaml = tmp_path / "tuned.yaml"
    export(study, info, tuned_yaml)
    assert yaml.safe_load(tuned_yaml.read_text())["knobs"]["inductor"] == OPTIONS

    resumed, _ = sweep(tmp_path)  # the same command again: nothing new to run
    assert len(resumed.get_trials(deepcopy=False)) == 3
    assert len(compiles(tmp_path)) == len(seen)


def test_no_finalist_starts_once_the_sweeps_time_limit_has_passed(tmp_path: Path) -> None:
    # The search's one trial is eager, measured by a sweep of the space without its finalists; the finalist would
    # compile it (the stage's own compile_mode). The same study resumed with its finalists and a limit that has
    # passed (as a --gpus orchestrator hands it to a worker): a finalist to run, none started, nothing compiled. A
    # limit of seconds instead would race the sweep's set-up (a loaded CI machine took more than 1 s to it).
    sweep(tmp_path, modes="none", with_finalists=False, trials=1)
    study, text = sweep(tmp_path, modes="none", finalist_mode="default", trials=1, deadline=time.time() - 1)
    assert len(study.get_trials(deepcopy=False)) == 1  # the search's one trial
    assert "finalists: the sweep's time limit has passed; no finalist started" in text
    assert not (tmp_path / "compiles.jsonl").exists()  # nothing compiled


def test_a_stage_with_no_compiled_trial_to_retry_says_so(tmp_path: Path) -> None:
    # A search that measured only the eager default: Inductor's options would change nothing there, and the stage
    # says why it starts nothing.
    study, text = sweep(tmp_path, trials=1)
    assert not [t for t in study.get_trials(deepcopy=False) if schema.ATTR_FINALIST_OF in t.user_attrs]
    lines = [line for line in text.splitlines() if line.startswith("finalists:")]
    assert lines == [
        "finalists: none started: no ranked trial compiles, and inductor coordinate_descent_tuning=true;"
        "epilogue_fusion=false changes only compiled ones"
    ], text
