"""The sweep's parent run: found or created (racing other workers), resumed with its params, described, finished."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mlflow.entities import Metric, Param, Run, RunTag, ViewType

from autotune.labels import sweep_run_name
from autotune.tracking import description
from autotune.tracking.experiment import SweepExperiment
from autotune.tracking.fields import (
    CHANGED_PARAM_TAG_PREFIX,
    MAX_PARAM_LEN,
    MAX_TAG_LEN,
    TAG_NOTE,
    TAG_ROLE,
    TAG_STUDY,
    clip,
)
from autotune.tracking.store import GuardedStore

__all__ = ["SweepRun"]


class SweepRun:
    """The parent run of one study in its experiment; one per study, shared by all its workers.

    :meth:`prepare` keeps what a start logs, so that a start missed during an outage is redone by the
    first call that needs the run id. Every other method talks to the store: call it inside
    :meth:`GuardedStore.guarded`.
    """

    def __init__(self, store: GuardedStore, experiment: SweepExperiment):
        self.store = store
        self.experiment = experiment
        self.run_id: str | None = None
        self._params: dict[str, str] = {}
        self._space_text: str | None = None

    def prepare(self, params: Mapping[str, str], space_text: str | None) -> None:
        """Remember the params and the space file's text that :meth:`start` logs."""
        self._params = {str(key): str(value) for key, value in params.items()}
        self._space_text = space_text

    def start(self) -> str:
        """Find or create the parent run, log the prepared params and space file, mark it RUNNING;
        its description says the sweep runs (until :meth:`describe` writes the finished one)."""
        client = self.store.client()
        run = self._find_or_create()
        run_id = run.info.run_id
        params, tags = _param_changes(run, self._params)
        note = description.running(self.experiment.study_name, self.experiment.id())
        client.log_batch(run_id, params=params, tags=[*tags, RunTag(TAG_NOTE, note)])
        if self._space_text is not None:
            client.log_text(run_id, self._space_text, "space.yaml")
        if run.info.status != "RUNNING":
            client.update_run(run_id, status="RUNNING")
        self.run_id = run_id
        return run_id

    def ensure(self) -> str:
        """The parent run id; (re)does the start when MLflow was down at start()."""
        return self.run_id or self.start()

    def lookup(self) -> str | None:
        """The parent run id if the run exists (found without starting it), else ``None``."""
        if self.run_id is None:
            parents = self._search()
            self.run_id = parents[0].info.run_id if parents else None
        return self.run_id

    def finish(
        self, metrics: list[Metric], artifacts: Mapping[str, str], status: str, files: Sequence[str] = ()
    ) -> None:
        """Log ``metrics``, text ``artifacts`` (``{file name: text}``) and ``files`` (local paths, at the run's
        root), end the run with ``status``."""
        client = self.store.client()
        run_id = self.ensure()
        client.log_batch(run_id, metrics=metrics)
        for name, text in artifacts.items():
            client.log_text(run_id, text, name)
        for path in files:
            client.log_artifact(run_id, path)
        client.set_terminated(run_id, status=status)

    def describe(self, text: str) -> None:
        """Set the run's description (markdown)."""
        self.store.client().set_tag(self.ensure(), TAG_NOTE, clip(text, MAX_TAG_LEN))

    def pages(self) -> list[str]:
        """Paths of the run's HTML artifacts, at its root or one folder down (the report's ``report/report.html``)."""
        client, run_id = self.store.client(), self.ensure()
        pages: list[str] = []
        for entry in client.list_artifacts(run_id):
            inside = client.list_artifacts(run_id, entry.path) if entry.is_dir else [entry]
            pages += [item.path for item in inside if not item.is_dir and item.path.endswith(".html")]
        return pages

    def add(self, metrics: list[Metric], texts: Mapping[str, str], files: Mapping[str, str]) -> bool:
        """Add ``metrics``, text artifacts (``{artifact path: text}``) and files (``{artifact folder: local
        path}``) to the parent run; False, creating nothing, when the study has none (it swept without MLflow)."""
        client = self.store.client()
        if self.run_id is None and client.get_experiment_by_name(self.experiment.name) is None:
            return False
        run_id = self.lookup()
        if run_id is None:
            return False
        client.log_batch(run_id, metrics=metrics)
        for name, text in texts.items():
            client.log_text(run_id, text, name)
        for folder, path in files.items():
            client.log_artifact(run_id, path, folder)
        return True

    def _find_or_create(self) -> Run:
        parents = self._search()
        if parents:
            return parents[0]
        study_name = self.experiment.study_name
        created = self.store.client().create_run(
            self.experiment.id(),
            run_name=sweep_run_name(study_name),
            tags={TAG_STUDY: study_name, TAG_ROLE: "sweep"},
        )
        # Two workers starting the same sweep at once may both create a parent. Everyone keeps the
        # oldest; a worker whose own parent lost deletes it, so the UI shows one sweep.
        parents = self._search()
        if not parents or parents[0].info.run_id == created.info.run_id:
            return created
        self.store.client().delete_run(created.info.run_id)
        return parents[0]

    def _search(self) -> list[Run]:
        """Parent runs of this study, oldest first (the study name is compared here, not quoted
        into the filter, so any study name is safe)."""
        runs = self.store.client().search_runs(
            [self.experiment.id()], f"tags.`{TAG_ROLE}` = 'sweep'", ViewType.ACTIVE_ONLY, max_results=100
        )
        parents = [run for run in runs if run.data.tags.get(TAG_STUDY) == self.experiment.study_name]
        return sorted(parents, key=lambda run: (run.info.start_time, run.info.run_id))


def _param_changes(run: Run, params: Mapping[str, str]) -> tuple[list[Param], list[RunTag]]:
    """New params to log, and tags for params whose value changed since the first start."""
    logged, tags = run.data.params, run.data.tags
    new: list[Param] = []
    changed: list[RunTag] = []
    for key, raw in params.items():
        value = clip(raw, MAX_PARAM_LEN)
        tag_key = CHANGED_PARAM_TAG_PREFIX + key
        if key not in logged:
            new.append(Param(key, value))
        elif logged[key] != value or tag_key in tags:
            changed.append(RunTag(tag_key, value))
    return new, changed
