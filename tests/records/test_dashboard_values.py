"""What optuna-dashboard and ``trials_dataframe()`` show: each param's real value and the metric's name.

A real SQLite study: ``autotune sweep`` (a process of its own) writes it, a fresh ``optuna.load_study``
reads it as the dashboard does. A study written by the encoding before (ordinals held as choice indices,
made here trial by trial as that code stored them) still resumes, ranks and exports the real values.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState
from replay_records import MATMUL_RECORDS
from study_records import measured_records

from autotune.records import schema
from autotune.search.replay import ReplayRecords
from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.sweep.setup import study_info
from autotune.views.export import export
from autotune.views.leaderboard import leaderboard
from autotune.views.progress import Progress

REPO = Path(__file__).resolve().parents[2]
SPACE = REPO / "search_spaces" / "triton_matmul.yaml"
RECORDS = MATMUL_RECORDS  # synthetic, of the real records' shape: CI has no data files
CHOICES = {"BLOCK_M": (64, 128, 256), "BLOCK_N": (64, 128, 256), "BLOCK_K": (32, 64, 128), "num_warps": (4, 8)}
CHOICES["num_stages"] = (3, 4)


def autotune(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def sweep(storage: str, study: str, n_trials: int, cwd: Path) -> subprocess.CompletedProcess[str]:
    args = ["sweep", str(SPACE), "--replay", str(RECORDS), "--storage", storage, "--study", study]
    done = autotune(*args, "--n-trials", str(n_trials), "--no-mlflow", "--no-report", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done


def test_a_sweep_stores_real_values_and_names_its_metric(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'autotune.db'}"
    sweep(storage, "dash", 8, tmp_path)
    study = optuna.load_study(study_name="dash", storage=storage)  # what optuna-dashboard reads
    assert study.metric_names == ["throughput"]
    frame = study.trials_dataframe()
    assert "value_throughput" in frame.columns
    trials = study.get_trials()
    assert len(trials) >= 8 and len(frame) == len(trials)
    for trial, (_, row) in zip(trials, frame.iterrows(), strict=True):
        real = trial.user_attrs[schema.ATTR_PARAMS]  # the params the replay looked up (the space has no fixed params)
        assert trial.params == real
        assert {name: row[f"params_{name}"] for name in CHOICES} == real
        assert trial.distributions == {name: CategoricalDistribution(c) for name, c in CHOICES.items()}
    assert {t.params["BLOCK_M"] for t in trials} <= {64, 128, 256}


# --- a study made before values were stored --------------------------------------------------------


def _old_trial(params: dict[str, int], *, default: bool = False) -> optuna.trial.FrozenTrial:
    """A measured trial as the index encoding stored it (attributes as an old sweep's trials show them)."""
    result = ReplayRecords.load(RECORDS).lookup(params)
    attrs: dict[str, Any] = {
        schema.ATTR_KIND: "measured",
        schema.ATTR_PARAMS: params,
        schema.ATTR_RESULT: result.to_dict(),
        schema.ATTR_STATUS: result.status.value,
        schema.ATTR_REASON: None,
        schema.ATTR_VIOLATION: -1.0,
    }
    if default:
        attrs[schema.ATTR_DEFAULT] = True
    return optuna.trial.create_trial(
        state=TrialState.COMPLETE,
        values=[result.metrics["throughput"]],
        params={name: CHOICES[name].index(value) for name, value in params.items()},
        distributions={name: IntDistribution(0, len(c) - 1) for name, c in CHOICES.items()},
        user_attrs=attrs,
        constraints={"feasibility": -1.0},
    )


OLD_TRIALS = [
    ({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}, True),
    ({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}, False),  # the best record
    ({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3}, False),
]


def test_an_old_study_resumes_ranks_and_exports_real_values(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'autotune.db'}"
    space = load_space(SPACE, replay=True)
    old = optuna.create_study(storage=storage, study_name="old", direction="maximize")
    old.set_user_attr(schema.STUDY_ATTR_INFO, study_info(space, SweepOptions(replay=RECORDS)).to_dict())
    for params, default in OLD_TRIALS:
        old.add_trial(_old_trial(params, default=default))

    # Optuna refuses a second distribution for a param of a study: new trials must be indices too.
    options = SweepOptions(report=False, study_name="old", storage=storage, replay=RECORDS, tracking=False, n_trials=7)
    summary = run_sweep(space, options, progress=Progress(None, None, stream=io.StringIO()))
    assert summary.measured == 7, summary.stop_reason
    study = optuna.load_study(study_name="old", storage=storage)
    assert study.metric_names == ["throughput"]  # named on resume
    measured = measured_records(study)
    assert len(measured) == 7
    for trial in study.get_trials():
        assert all(isinstance(d, IntDistribution) for d in trial.distributions.values())
        decoded = space.params_from_optuna(trial.params, trial.distributions)
        assert decoded == trial.user_attrs[schema.ATTR_PARAMS]  # the configuration the replay measured

    info = schema.load_study_info(study)
    assert info is not None
    rows = leaderboard(study, info)
    assert rows[0].trial == 1 and rows[0].params == OLD_TRIALS[1][0]
    assert sorted(_key(r.params) for r in rows) == sorted(_key(t.params) for t in measured)
    config = export(study, info, tmp_path / "tuned.yaml", storage=storage)
    assert config.provenance["trial"] == 1
    assert yaml.safe_load((tmp_path / "tuned.yaml").read_text())["params"] == OLD_TRIALS[1][0]


def _key(params: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted(params.items()))
