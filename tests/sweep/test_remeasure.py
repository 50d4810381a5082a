"""A winner that holds up: the top trials are measured again in fresh processes."""

from __future__ import annotations

from pathlib import Path

import optuna
from study_records import measured_records
from trial_workloads import outlier_space

from autotune.records import schema
from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.tuned.file import load
from autotune.views.export import export
from autotune.views.leaderboard import leaderboard
from autotune.views.progress import Progress


def test_remeasurement_dethrones_a_lucky_first_measurement(tmp_path: Path) -> None:
    space_file = tmp_path / "outlier.yaml"
    space_file.write_text(outlier_space(tmp_path / "lucky.marker", ("steady", "lucky")))
    storage = f"sqlite:///{tmp_path}/study.db"
    options = SweepOptions(storage=storage, tracking=False, remeasure_top=2, remeasure_repeats=2)
    log = tmp_path / "progress.log"
    with log.open("w") as stream:
        summary = run_sweep(load_space(space_file), options, Progress(None, None, stream))

    study = optuna.load_study(study_name="outlier", storage=storage)
    info = schema.load_study_info(study)
    assert info is not None
    first = {t.params["config"]: t.result for t in measured_records(study)}
    assert set(first) == {"steady", "lucky"}
    lucky_first, steady_first = (first[c].metrics["throughput"] for c in ("lucky", "steady"))  # type: ignore[union-attr]
    assert lucky_first > 2 * steady_first  # measured once, the lucky configuration looks best ...

    rows = leaderboard(study, info)
    winner = next(r for r in rows if r.rank == 1)
    assert winner.params["config"] == "steady"  # ... re-measured, it is not
    lucky = next(r for r in rows if r.params["config"] == "lucky")
    assert lucky.remeasured is not None and len(lucky.remeasured["values"]) == 2
    assert lucky.remeasured["median"] < winner.value < lucky.remeasured["first"]
    assert summary.best_trial == winner.trial
    assert "re-measuring trial" in log.read_text()

    tuned = export(study, info, tmp_path / "tuned.yaml")
    assert tuned.params == {"config": "steady"}
    assert load(tmp_path / "tuned.yaml").provenance["trial"] == winner.trial
