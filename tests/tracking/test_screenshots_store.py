"""scripts/screenshots.py serves a sweep's store copied from another machine (no browser needed here)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest
from mlflow.tracking import MlflowClient
from recorded_studies import make_info, make_study

from autotune.records import StudyRecords
from autotune.tracking import HTTP_ENV_DEFAULTS, SweepTracker

REPO = Path(__file__).resolve().parents[2]


def _screenshots() -> ModuleType:
    """scripts/screenshots.py, imported by path (scripts/ is not a package; it imports headless.py beside it)."""
    sys.path.insert(0, str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location("screenshots", REPO / "scripts" / "screenshots.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


screenshots = _screenshots()


@pytest.fixture(autouse=True)
def _restore_http_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in HTTP_ENV_DEFAULTS:
        monkeypatch.setenv(name, "0")
        monkeypatch.delenv(name)


def test_a_moved_store_is_served_from_a_copy_that_points_at_its_artifacts(tmp_path: Path) -> None:
    made = tmp_path / "gpu-box" / "sweep"
    made.mkdir(parents=True)
    tracker = SweepTracker("rn50", f"sqlite:///{made / 'mlflow.db'}")
    parent_id = tracker.start({})
    assert parent_id is not None
    info = make_info()
    tracker.finish(StudyRecords.read(make_study(None, info), info), {}, {"leaderboard.csv": "rank,trial\n1,0\n"})
    assert screenshots.moved_root(made / "mlflow.db") is None  # where it was made: nothing to do

    here = tmp_path / "here"
    shutil.move(made, here)
    old_root = screenshots.moved_root(here / "mlflow.db")
    assert old_root == str(made / "mlruns")
    copy = screenshots.relocated(here / "mlflow.db", old_root, tmp_path)
    client = MlflowClient(f"sqlite:///{copy}")
    board = Path(client.download_artifacts(parent_id, "leaderboard.csv", str(tmp_path)))
    assert board.read_text() == "rank,trial\n1,0\n"
    assert client.get_run(parent_id).info.artifact_uri.startswith(str(here / "mlruns"))
    # The store itself is left as it was.
    assert MlflowClient(f"sqlite:///{here / 'mlflow.db'}").get_run(parent_id).info.artifact_uri.startswith(old_root)
