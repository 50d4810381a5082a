"""The informed start in real CPU sweeps: measured right after the default, counted in the budget, queued once
however many workers share the study (and by a resumed sweep), and not at all when turned off."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from study_records import measured_records, records_of
from sweep_processes import load_study, run, sweep_args

from autotune.records import schema
from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.views.progress import Progress

# On a CPU without AMX the expert keeps fp32 and the batch, and turns on the fused optimizer (and would compile:
# not offered here, to keep the trials short).
SPACE = """\
workload: {{name: "trial_workloads:tiny_mlp", preset: tiny}}
device: cpu
budget: {{trials: {budget}, trial_timeout: 2m}}
sampler: {{name: tpe, seed: 0}}
params:
  batch_size: {{choices: [8, 16, 32], default: 8}}
  precision: [default, fp32]
  fused_optimizer: [false, true]
"""


def write(tmp_path: Path, budget: int) -> Path:
    path = tmp_path / "informed.yaml"
    path.write_text(SPACE.format(budget=budget))
    return path


def sweep(tmp_path: Path, budget: int, **options: object) -> tuple[optuna.Study, str]:
    storage = f"sqlite:///{tmp_path}/autotune.db"
    log = tmp_path / "progress.log"
    with log.open("a") as stream:
        run_sweep(
            load_space(write(tmp_path, budget)),
            SweepOptions(report=False, storage=storage, tracking=False, remeasure_top=0, prune_ratio=0, **options),  # type: ignore[arg-type]
            Progress(None, None, stream),
        )
    return optuna.load_study(study_name="informed", storage=storage), log.read_text()


def informed(study: optuna.Study) -> list[int]:
    return [record.number for record in records_of(study).trials if record.informed]


@pytest.mark.slow
def test_measured_second_counted_in_the_budget_and_queued_once(tmp_path: Path) -> None:
    study, text = sweep(tmp_path, budget=3)
    measured = measured_records(study)
    assert [r.number for r in measured] == [0, 1, 2]  # the budget: the informed start counts like any trial
    assert measured[0].default and informed(study) == [1]
    assert measured[1].params == {"batch_size": 8, "precision": "default", "fused_optimizer": True}
    assert measured[1].ok
    decision = study.user_attrs[schema.STUDY_ATTR_INFORMED]
    assert decision["trial"] == 1 and decision["params"] == measured[1].params
    assert "informed start: trial 1 measures what an expert would try first on CPU" in text
    assert "informed start: t001" in text  # its progress line says what it is

    resumed, _ = sweep(tmp_path, budget=4)  # the same study, one more trial: no second informed start
    assert len(measured_records(resumed)) == 4 and informed(resumed) == [1]


@pytest.mark.slow
def test_turned_off(tmp_path: Path) -> None:
    study, text = sweep(tmp_path, budget=2, informed_start=False)
    assert len(measured_records(study)) == 2 and informed(study) == []
    assert schema.STUDY_ATTR_INFORMED not in study.user_attrs and "informed start" not in text


@pytest.mark.slow
def test_queued_once_with_two_workers(tmp_path: Path) -> None:
    space = write(tmp_path, budget=4)
    done = run(tmp_path, sweep_args(space, "--device", "cpu", "--gpus", "0,1"))
    assert done.returncode == 0, done.stderr
    assert "budget of 4 measured trials reached" in done.stdout
    study = load_study(tmp_path, "informed")
    assert len(measured_records(study)) == 4
    assert len(informed(study)) == 1  # one worker decided it, under the study's lease
    assert sum("informed start: trial" in line for line in done.stderr.splitlines()) == 1
    assert study.user_attrs[schema.STUDY_ATTR_INFORMED]["trial"] == informed(study)[0]
