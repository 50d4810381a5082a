"""PNGs of a sweep as a reader sees it: MLflow's runs page, the sweep's run page, and the report.

    python scripts/screenshots.py SWEEP_FOLDER [--study NAME] [--out docs]

SWEEP_FOLDER holds the sweep's MLflow store as autotune leaves it by default: ``mlflow.db`` and ``mlruns/``
(or, from ``mlflow/start-server.sh``, ``mlflow.db`` and ``artifacts/``). The script serves it with
``mlflow server`` on a free port of 127.0.0.1, opens it in headless Chromium (Debian's ``chromium``,
see ``scripts/headless.py``) and writes into ``--out``:

- ``mlflow_runs.png``: the experiment's runs page as the saved view "autotune leaderboard" (trials by
  speedup, metric and param columns), the link the sweep's description gives;
- ``mlflow_sweep_run.png``: the sweep's parent run, its description on top;
- ``report.png``: the top of the report page (``report/report.html`` of the parent run).

MLflow's assistant panel and the shared-view banner are closed first. Without ``--study``, the most
recently started sweep in the store is taken. A store copied from another machine (a GPU box without a
browser) still works: its database records artifact folders as absolute paths, so a temporary copy of
the database is pointed at ``SWEEP_FOLDER/mlruns``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/ is not a package: its headless.py, by path
from headless import BrowserError, Chromium, Page, find_chromium

from autotune.tracking import TAG_PARENT, TAG_ROLE, TAG_STUDY
from autotune.tracking.ui import runs_link

__all__ = ["Sweep", "capture", "drawn_report", "find_sweep", "moved_root", "relocated", "serve", "shoot"]

WIDTH = 1800  # the runs table's metric, param and status columns side by side
# MLflow opens its assistant panel on a browser's first visit: a browser that has seen it and closed it.
_QUIET_UI = {"mlflow.assistant.fab.autoOpenedOnFirstLoad_v1": "true", "mlflow.assistant.panelOpen_v1": "false"}
_START_TIMEOUT_S = 90.0  # mlflow server starts in 5-15 s on 2 cores; the bound turns a broken start into an error


@dataclass(frozen=True)
class Sweep:
    """A sweep in an MLflow store: its experiment, its parent run, how many trial runs, its report's path."""

    study: str
    experiment_id: str
    run_id: str
    trials: int
    report: str | None


def find_sweep(tracking_uri: str, study: str | None = None) -> Sweep:
    """The sweep of ``study`` (default: the most recently started one) in the store at ``tracking_uri``."""
    client = MlflowClient(tracking_uri)
    experiments = [e for e in client.search_experiments() if e.name.startswith("autotune/")]
    if study is not None:
        experiments = [e for e in experiments if e.tags.get(TAG_STUDY) == study]
    ids = [e.experiment_id for e in experiments]
    parents = client.search_runs(ids, f"tags.`{TAG_ROLE}` = 'sweep'", ViewType.ACTIVE_ONLY) if ids else []
    if not parents:
        raise SystemExit(f"no autotune sweep{f' of study {study!r}' if study else ''} in {tracking_uri}")
    parent = max(parents, key=lambda run: run.info.start_time)
    trials = client.search_runs([parent.info.experiment_id], f"tags.`{TAG_PARENT}` = '{parent.info.run_id}'")
    reports = [a.path for a in client.list_artifacts(parent.info.run_id, "report") if a.path.endswith(".html")]
    report = reports[0] if reports else None
    return Sweep(parent.data.tags[TAG_STUDY], parent.info.experiment_id, parent.info.run_id, len(trials), report)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def moved_root(database: Path) -> str | None:
    """The folder an ``mlruns/`` store was made in, when it is not where ``database`` is now; else None."""
    with contextlib.closing(sqlite3.connect(database)) as db:
        # MLflow's own "Default" experiment sits in whatever folder MLflow was first run from: autotune's only.
        query = "SELECT artifact_location FROM experiments WHERE name LIKE 'autotune/%'"
        locations = [row[0] for row in db.execute(query)]
    here = str(database.absolute().parent / "mlruns")
    for location in locations:
        root, found, _ = location.removeprefix("file://").partition("/mlruns/")
        if found and f"{root}/mlruns" != here:
            return f"{root}/mlruns"
    return None


def relocated(database: Path, old_root: str, out: Path) -> Path:
    """A copy of ``database`` in folder ``out`` whose artifact paths under ``old_root`` point beside ``database``."""
    copy = out / database.name
    shutil.copy(database, copy)
    new_root = str(database.absolute().parent / "mlruns")
    with contextlib.closing(sqlite3.connect(copy)) as db, db:
        db.execute("UPDATE experiments SET artifact_location = replace(artifact_location, ?, ?)", (old_root, new_root))
        db.execute("UPDATE runs SET artifact_uri = replace(artifact_uri, ?, ?)", (old_root, new_root))
    return copy


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """``mlflow server`` over the store in ``folder`` on a free port of 127.0.0.1; yields its URL."""
    folder = folder.absolute()
    with tempfile.TemporaryDirectory() as tmp:
        database = folder / "mlflow.db"
        if (old_root := moved_root(database)) is not None:
            print(f"the store was made in {old_root}: serving a copy of its database that points at {folder}/mlruns")
            database = relocated(database, old_root, Path(tmp))
        with _server(folder, database) as url:
            yield url


@contextlib.contextmanager
def _server(folder: Path, database: Path) -> Iterator[str]:
    port = _free_port()
    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    command += ["--backend-store-uri", f"sqlite:///{database}"]
    if (folder / "artifacts").is_dir():  # a store of mlflow/start-server.sh: artifacts behind mlflow-artifacts:/
        command += ["--artifacts-destination", str(folder / "artifacts")]
    # No job runner: it serves GenAI features and starts worker processes that only cost CPU here.
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, cwd=folder, stdout=log, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + _START_TIMEOUT_S
            while not _healthy(url):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    tail = log.read().decode(errors="replace")[-3000:]
                    raise RuntimeError(f"mlflow server did not answer on {url}:\n{tail}")
                time.sleep(0.2)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def quiet_page(browser: Chromium, url: str, height: int) -> Page:
    """A tab on the MLflow UI at ``url`` whose browser has already dismissed MLflow's first-visit panels."""
    page = browser.new_page(WIDTH, height)
    page.goto(f"{url}/#/")
    page.wait_for("!!document.body && document.body.innerText.length > 0", 30, "MLflow's UI")
    for key, value in _QUIET_UI.items():
        page.evaluate(f"localStorage.setItem({key!r}, {value!r})")
    page.goto("about:blank")  # the next page loads the app afresh, reading those settings
    return page


def runs_page(page: Page, url: str, sweep: Sweep) -> None:
    """Open the saved view "autotune leaderboard" of the sweep's experiment; wait for its rows."""
    page.goto(f"{url}/{runs_link(sweep.experiment_id)}")
    page.wait_for_text("speedup", "throughput", f"sweep {sweep.study}", timeout_s=60)
    page.click("[aria-label='Hide banner']")  # "You're viewing a shared view": noise in a picture
    time.sleep(1.0)  # the table settles its column widths after the rows arrive


def run_page(page: Page, url: str, sweep: Sweep) -> None:
    """Open the sweep's parent run; wait for its description."""
    page.goto(f"{url}/#/experiments/{sweep.experiment_id}/runs/{sweep.run_id}?workflowType=machine_learning")
    page.wait_for_text("Export the winner", timeout_s=60)
    page.click_text("Show more")  # the whole description
    time.sleep(0.5)


def drawn_report(browser: Chromium, page: Page, timeout_s: float = 60.0) -> Page:
    """The frame of the HTML artifact that ``page`` shows, once a plotly figure is drawn in it."""
    deadline = time.monotonic() + timeout_s
    while (frame := browser.frame("blob:")) is None:  # MLflow shows HTML in a sandboxed iframe
        if time.monotonic() > deadline:
            raise BrowserError(f"no report frame after {timeout_s:.0f} s; the page shows:\n{page.text()[:2000]}")
        time.sleep(0.25)
    frame.wait_for("!!document.querySelector('.js-plotly-plot .main-svg')", timeout_s, "a plotly figure")
    return frame


def capture(folder: Path, out: Path, study: str | None = None) -> list[Path]:
    """Serve the store in ``folder`` and write the PNGs of its sweep into ``out``; returns their paths."""
    with serve(folder) as url, Chromium.launch() as browser:
        return shoot(browser, url, find_sweep(url, study), out)  # through the server: it finds moved artifacts


def shoot(browser: Chromium, url: str, sweep: Sweep, out: Path) -> list[Path]:
    """Write the PNGs of ``sweep``, served at ``url``, into ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    page = quiet_page(browser, url, max(700, min(2000, 330 + 37 * (sweep.trials + 1))))
    runs_page(page, url, sweep)
    written = [_write(out / "mlflow_runs.png", page.screenshot())]
    page = quiet_page(browser, url, 1100)
    run_page(page, url, sweep)
    written.append(_write(out / "mlflow_sweep_run.png", page.screenshot()))
    if sweep.report is None:
        print(f"no report.png: the run of sweep {sweep.study} has no report/*.html artifact")
    else:
        written.append(_write(out / "report.png", _report_png(url, sweep, browser)))
    return written


def _report_png(url: str, sweep: Sweep, browser: Chromium) -> bytes:
    """The top of the report page: the run's artifact, fetched from the server and opened as a file."""
    assert sweep.report is not None
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(MlflowClient(url).download_artifacts(sweep.run_id, sweep.report, tmp))
        page = browser.new_page(1280, 1500)
        page.goto(local.as_uri())
        page.wait_for("!!document.querySelector('.js-plotly-plot .main-svg')", 60, "a plotly figure")
        time.sleep(0.5)
        return page.screenshot()


def _write(path: Path, png: bytes) -> Path:
    path.write_bytes(png)
    print(f"wrote {path} ({len(png) / 1024:.0f} KiB)")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="folder with the sweep's mlflow.db (and mlruns/ or artifacts/)")
    parser.add_argument("--study", help="the sweep's study (default: the most recently started sweep)")
    parser.add_argument("--out", type=Path, default=Path("docs"), help="where the PNGs go (default: docs)")
    args = parser.parse_args(argv)
    if not (args.folder / "mlflow.db").is_file():
        parser.error(f"{args.folder / 'mlflow.db'} is not there")
    if find_chromium() is None:
        parser.error("no chromium binary: apt-get install chromium")
    capture(args.folder, args.out, args.study)
    return 0


if __name__ == "__main__":
    sys.exit(main())
