"""``autotune verify`` on a real exported study: it holds, it regressed, the file is too old.

The workload's steps sleep (250 ms by default, 50 ms tuned: trial_workloads.paced), so the figures
are steady on a loaded CPU and the default-vs-winner speedup is about 5x. The sleeps are long beside a
step's own work: with 10 ms tuned steps, CI's loaded 2-core machine measured the same config 3.3% slower
than the sweep had, past the 3% tolerance; with 30 ms steps this 2-core machine, running the whole suite,
once measured it 6.3% slower, past the 5.2% tolerance of that run, and CI's once 9.9% slower (50 ms), past 6.6%.
So the steps are paced by a metronome (trial_workloads._Metronome): a step takes its period whatever its own
work took, up to the period. Neither choice is the workload's own default (60 ms): the PyTorch-default trial would
take it, and the speedup would be the tuned step's over itself.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pythonpath import child_env

from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.trial_process import TrialRunner
from autotune.views.export import export
from autotune.views.progress import Progress
from autotune.views.verify import verify

HERE = Path(__file__).resolve().parents[1]
SPACE = """\
workload: {name: "trial_workloads:paced", preset: tiny}
device: cpu
budget: {trials: 2, trial_timeout: 2m}
sampler: {name: grid, seed: 0}
params:
  step_ms: [250.0, 50.0]
"""


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("verify")
    space_file = folder / "paced.yaml"
    space_file.write_text(SPACE)
    storage = f"sqlite:///{folder}/study.db"
    options = SweepOptions(report=False, storage=storage, tracking=False, remeasure_top=1, remeasure_repeats=2)
    with (folder / "progress.log").open("w") as stream:
        run_sweep(load_space(space_file), options, Progress(None, None, stream))
    import optuna

    from autotune.records import schema

    study = optuna.load_study(study_name="paced", storage=storage)
    info = schema.load_study_info(study)
    assert info is not None
    path = folder / "tuned.yaml"
    export(study, info, path, storage=storage)
    return path


def _verify(path: Path, repeats: int = 2) -> subprocess.CompletedProcess[str]:
    env = child_env(HERE)
    return subprocess.run(
        [sys.executable, "-m", "autotune", "verify", str(path), "--repeats", str(repeats)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _edited(tuned: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], object]) -> Path:
    data = yaml.safe_load(tuned.read_text())
    edit(data["provenance"])
    path = tmp_path / "edited.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.slow
def test_the_exported_config_holds_on_the_machine_it_was_tuned_on(tuned: Path) -> None:
    done = _verify(tuned, repeats=3)  # the median of three: one run slowed by the loaded machine does not decide
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert "ok: the tuned config holds on this machine" in done.stdout
    speedup = next(line for line in done.stdout.splitlines() if line.startswith("speedup"))
    assert float(speedup.split()[1].rstrip("x")) > 4  # 250 ms against 50 ms steps


@pytest.mark.slow
def test_a_figure_far_above_what_this_machine_measures_is_a_regression(tuned: Path, tmp_path: Path) -> None:
    def inflate(provenance: dict[str, Any]) -> None:
        provenance["metrics"]["remeasured"]["median"] *= 10

    done = _verify(_edited(tuned, tmp_path, inflate))
    assert done.returncode == 3, done.stdout + done.stderr[-2000:]
    verdict = done.stdout.strip().splitlines()[-1]
    # The throughput reason; a speedup reason may come first, when this loaded CPU's speedup missed its tolerance.
    assert re.fullmatch(
        r"REGRESSION: (speedup [^;]+; )?throughput [^;]+ recorded: same set-up, other figure", verdict
    ), verdict


@pytest.mark.slow
def test_a_lost_speedup_on_other_software_names_the_change(tuned: Path, tmp_path: Path) -> None:
    def elsewhere(provenance: dict[str, Any]) -> None:
        provenance["env"]["torch"] = "2.11.0+cu130"
        provenance["metrics"]["speedup_vs_default"] *= 10

    # What `autotune verify --repeats 2` prints, in this process (its runs in real trial processes all the same):
    # its exit codes are the other tests'.
    runner = TrialRunner()
    found = verify(_edited(tuned, tmp_path, elsewhere), lambda spec: runner.run(spec, 300), repeats=2)
    printed = "\n".join(found.lines())
    assert found.regression is not None, printed
    assert "changed  torch: recorded 2.11.0+cu130, here" in printed
    verdict = printed.splitlines()[-1]
    assert "x recorded: other set-up (torch: recorded 2.11.0+cu130" in verdict, verdict


def test_a_file_exported_before_verify_existed_is_bad_input(tuned: Path, tmp_path: Path) -> None:
    done = _verify(_edited(tuned, tmp_path, lambda provenance: provenance.pop("trial_params")))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "autotune: error: this tuned file does not record its trial's and the default trial's params (written "
        "before `autotune verify` existed): export it again with `autotune export --study paced`"
    )
