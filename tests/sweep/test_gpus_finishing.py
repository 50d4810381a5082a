"""``--gpus``: the finishing stages run once, on one GPU, after every search worker has ended."""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_processes import load_study, run, sweep_args, trial_pids, write_space

from autotune.records import schema

BUDGET = 4


@pytest.mark.slow
def test_the_top_is_re_measured_once_not_by_every_worker(tmp_path: Path) -> None:
    space = write_space(tmp_path, "noted", "noted", BUDGET, step_ms=20.0)
    args = sweep_args(space, "--device", "cpu", "--gpus", "0,1", "--remeasure-top", "2", "--remeasure-repeats", "1")
    done = run(tmp_path, args)
    assert done.returncode == 0, done.stderr
    assert f"budget of {BUDGET} measured trials reached" in done.stdout  # the search's stop reason, not the stage's

    study = load_study(tmp_path, "noted")
    remeasured = [t for t in study.trials if schema.remeasured_key(t.number) in study.user_attrs]
    assert len(remeasured) == 2
    assert done.stderr.count("re-measuring trial") == 2, done.stderr
    devices = list(trial_pids(tmp_path).values())
    assert len(devices) == BUDGET + 2  # every trial process: the search's, then the two re-measurements
    assert devices.count("0") >= 2  # the re-measurements ran on the first device
