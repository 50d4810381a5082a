"""A real sweep's MLflow store, served by ``mlflow server`` and read in a real headless Chromium.

What a reader of the UI must find: the experiment opening on its runs table (Model training), the trials
as a leaderboard (throughput and speedup columns, best first), the sweep's description on its parent run,
and the report drawn in MLflow's artifact viewer, one link away from that description. The browser is
Debian's ``chromium`` (``.ci/run`` installs it), driven over the DevTools protocol by ``scripts/headless.py``;
``scripts/screenshots.py``'s serving and shooting code is what runs here.
"""

from __future__ import annotations

import importlib.util
import struct
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import optuna
import pytest
from mlflow.entities import Run
from mlflow.tracking import MlflowClient
from pythonpath import child_env

from autotune.records import load_study_info
from autotune.tracking.ui import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG
from autotune.views.leaderboard import leaderboard

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"


def _script(name: str) -> ModuleType:
    """A module of scripts/, imported by path (scripts/ is not a package)."""
    sys.path.insert(0, str(REPO / "scripts"))  # screenshots.py imports headless.py beside it
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


headless = _script("headless")
screenshots = _script("screenshots")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        headless.find_chromium() is None, reason="no chromium binary (apt-get install chromium; .ci/run does)"
    ),
]

# Four trials of a sub-millisecond MLP step: the default, then three drawn by a seeded sampler; the first two
# re-measured once, so the leaderboard ranks by a re-measured median.
SPACE = """\
workload: {name: "trial_workloads:tiny_mlp", preset: tiny}
device: cpu
budget: {trials: 4, trial_timeout: 1m}
sampler: {name: random, seed: 0}
params:
  precision: [default, fp32, bf16]
  batch_size: {choices: [8, 16, 32], default: 16}
"""
STUDY = "ui"


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A folder where ``autotune sweep ui.yaml`` ran with its defaults (autotune.db, mlflow.db, mlruns/), and
    what the sweep printed."""
    folder = tmp_path_factory.mktemp("ui-sweep")
    (folder / f"{STUDY}.yaml").write_text(SPACE)
    env = child_env(without=["MLFLOW_TRACKING_URI"])  # MLflow's default: ./mlflow.db
    command = [sys.executable, "-m", "autotune", "sweep", f"{STUDY}.yaml", "--remeasure-top", "2"]
    done = subprocess.run(
        [*command, "--remeasure-repeats", "1"], cwd=folder, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return folder, done.stdout + done.stderr  # the progress lines go to stderr


def _speedup(run: Run) -> float:
    return run.data.metrics["speedup"]


def _rows(page: Any) -> list[str]:
    """The run names of the runs table, top row first (the grid's DOM order is not its display order)."""
    script = """[...document.querySelectorAll('[row-index] a')]
        .map(a => [Number(a.closest('[row-index]').getAttribute('row-index')), a.innerText.trim()])"""
    return [name for _, name in sorted(page.evaluate(script))]


@pytest.mark.slow
def test_mlflow_ui_shows_the_sweep_as_a_leaderboard(swept: tuple[Path, str], tmp_path: Path) -> None:
    folder, printed = swept
    tracking_uri = f"sqlite:///{folder / 'mlflow.db'}"
    sweep = screenshots.find_sweep(tracking_uri, STUDY)
    client = MlflowClient(tracking_uri)
    assert client.get_experiment(sweep.experiment_id).tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
    runs = client.search_runs([sweep.experiment_id], "tags.`autotune.role` = 'trial'")
    trials = {run.data.tags["autotune.trial"]: run for run in runs}
    study = optuna.load_study(study_name=STUDY, storage=f"sqlite:///{folder / 'autotune.db'}")
    info = load_study_info(study)
    assert info is not None
    winner = next(row for row in leaderboard(study, info) if row.rank == 1)  # what `autotune leaderboard` names
    winner_run = trials[str(winner.trial)]

    lines = [line for line in printed.splitlines() if line.startswith("MLflow: http://127.0.0.1:5000/")]
    assert lines and lines[-1].endswith(" (with `mlflow ui` in this folder running)"), printed[-2000:]
    link = lines[-1].removeprefix("MLflow: http://127.0.0.1:5000/").split(" ", 1)[0]

    started = time.monotonic()
    with screenshots.serve(folder) as url, headless.Chromium.launch() as browser:
        page = screenshots.quiet_page(browser, url, 1000)

        # The link the sweep printed opens the runs table (not GenAI's overview) as the leaderboard view.
        page.goto(f"{url}/{link}")
        text = page.wait_for_text("Run Name", "autotune leaderboard", "speedup", f"sweep {STUDY}", timeout_s=60)
        assert page.evaluate("location.hash").startswith(f"#/experiments/{sweep.experiment_id}/runs?")

        # Every trial with its throughput and speedup, the winner first.
        names = [run.info.run_name for run in trials.values()]
        assert all(name in text for name in names), text
        metrics = winner_run.data.metrics
        for value in (metrics["speedup"], metrics["throughput"]):
            assert f"{value:g}" in text, (value, text)  # as the table prints it: 1.9638, 112303
        by_speedup = sorted((r for r in trials.values() if "speedup" in r.data.metrics), key=_speedup, reverse=True)
        shown = [name for name in _rows(page) if name in names]
        assert shown[: len(by_speedup)] == [r.info.run_name for r in by_speedup]
        assert shown[0] == winner_run.info.run_name

        # The parent run's description: the winner, its speedup (the leaderboard's), how to export it.
        screenshots.run_page(page, url, sweep)
        text = page.text()
        expected = f"Winner: trial {winner.trial}" if not winner.default else "Winner: the PyTorch defaults"
        assert expected in text and f"autotune export --study {STUDY} -o tuned.yaml" in text
        assert winner.default or f"{winner.speedup:.2f}x the PyTorch defaults" in text

        # One click from there: the report, drawn (plotly) in MLflow's artifact viewer.
        links = page.evaluate("[...document.querySelectorAll('a')].map(a => [a.innerText, a.href])")
        href = dict(links).get("report/report.html")
        assert href and "/artifacts/report/report.html" in href
        page.goto(href)
        frame = screenshots.drawn_report(browser, page)
        assert frame.evaluate("document.querySelector('h1').innerText") == f"autotune report: {STUDY}"

        pngs = screenshots.shoot(browser, url, sweep, tmp_path)
    assert time.monotonic() - started < 90, "the UI part of this test should take well under a minute"
    assert [png.name for png in pngs] == ["mlflow_runs.png", "mlflow_sweep_run.png", "report.png"]
    for png in pngs:
        header = png.read_bytes()[:24]
        assert header[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", header[16:24])
        assert width >= 1280 and height >= 700, (png.name, width, height)
