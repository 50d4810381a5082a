"""The sweep's MLflow experiment ``autotune/<study>``: found, created (racing other workers) or restored,
marked as a model-training experiment, and given the saved view "autotune leaderboard"."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote

from mlflow.entities import Run
from mlflow.exceptions import MlflowException

from autotune.tracking.fields import TAG_STUDY
from autotune.tracking.store import GuardedStore
from autotune.tracking.ui import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, VIEW_TAG, leaderboard_view, needs_kind

__all__ = ["SweepExperiment"]

_logger = logging.getLogger(__name__)


class SweepExperiment:
    """The experiment of one study; its id is looked up (or the experiment made) on first use.

    Call :meth:`id` inside :meth:`GuardedStore.guarded`: it talks to the store.
    """

    def __init__(self, store: GuardedStore, study_name: str):
        self.store = store
        self.study_name = study_name
        self.name = f"autotune/{study_name}"
        self._id: str | None = None

    @property
    def known_id(self) -> str | None:
        """The experiment id if this process has looked it up already (no store call)."""
        return self._id

    def id(self) -> str:
        """The experiment id, creating the experiment if needed (another worker may win the race)."""
        if self._id is None:
            self._id = self._find_or_create()
        return self._id

    def save_view(self, trial_runs: Iterable[Run], objective: str) -> None:
        """(Re)write the saved view "autotune leaderboard" with the columns of ``trial_runs`` (``objective``: the
        study's first objective metric)."""
        value = leaderboard_view(trial_runs, int(time.time() * 1000), objective)
        self.store.client().set_experiment_tag(self.id(), VIEW_TAG, value)

    def _find_or_create(self) -> str:
        experiment = self.store.client().get_experiment_by_name(self.name)
        if experiment is None:
            return self._create()
        if experiment.lifecycle_stage == "deleted":
            # A deleted experiment still holds its name: creating it again would fail forever.
            _logger.warning("MLflow experiment %r was deleted; restoring it", self.name)
            self.store.client().restore_experiment(experiment.experiment_id)
        if needs_kind(experiment.tags):  # made by an autotune before this tag, or marked GenAI by MLflow's UI
            self.store.client().set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        return experiment.experiment_id

    def _create(self) -> str:
        client = self.store.client()
        try:
            return client.create_experiment(
                self.name,
                artifact_location=_local_artifact_location(self.store.tracking_uri, self.study_name),
                tags={TAG_STUDY: self.study_name, EXPERIMENT_KIND_TAG: EXPERIMENT_KIND},
            )
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            experiment = client.get_experiment_by_name(self.name)
            if experiment is None:
                raise
            return experiment.experiment_id


def _local_artifact_location(tracking_uri: str, study_name: str) -> str | None:
    """For a local sqlite store: artifacts next to the database, not in whatever folder the sweep
    was started from (MLflow's client-side default is ``./mlruns`` of the current folder)."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    db_path = unquote(tracking_uri.removeprefix("sqlite:///").split("?", 1)[0])
    if not db_path or db_path == ":memory:":
        return None
    safe_name = re.sub(r"[^\w.-]+", "_", study_name)
    return str(Path(db_path).absolute().parent / "mlruns" / "autotune" / safe_name)
