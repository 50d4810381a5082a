"""What MLflow's UI (3.17) makes of the experiment: its kind, a saved leaderboard view, links into the UI.

Found in MLflow 3.17.2's UI code and checked in a browser (``tests/tracking/test_ui_browser.py``):

- The experiment tag ``mlflow.experimentKind`` marks a model-training experiment
  (``custom_model_development``). MLflow 3.17.2's UI ignores it when it opens an experiment: it follows
  its global "GenAI / Model training" switch (the URL's ``workflowType``, else the last choice, kept in
  the browser; GenAI at first, whose overview shows traces and tokens). MLflow's source after 3.17
  switches to "Model training" on opening an experiment of this kind (read in its code, not run here).
  So links here carry ``workflowType=machine_learning``.
- Its runs table shows no metric column by default. A saved view is an experiment tag
  ``mlflow.sharedViewState.<id>`` holding ``{"name", "createdAt", "state"}``, where ``state`` is the
  JSON of the page's search facets and table state; ``viewStateShareKey=<id>`` in the runs page's URL
  opens it, and the page's "Views" menu lists it. Ours sorts by ``speedup``, which also lays the table
  flat (MLflow nests child runs under their parent only when sorted by start time), and shows the
  metric, param and status columns. Expanded rows are not part of a saved view.
- Links in a run's description (markdown) may be relative (``#/experiments/...``); MLflow opens them
  in a new tab of the same UI, whatever its host and path.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import quote

from mlflow.entities import Run

from autotune.tracking.fields import SPEEDUP, TAG_OUTCOME, THROUGHPUT

__all__ = [
    "EXPERIMENT_KIND",
    "EXPERIMENT_KIND_TAG",
    "VIEW_ID",
    "VIEW_NAME",
    "VIEW_TAG",
    "address",
    "artifact_link",
    "leaderboard_view",
    "needs_kind",
    "runs_link",
]

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
# Kinds MLflow's UI counts as model training: one of these, set by hand, is left alone.
_TRAINING_KINDS = frozenset(
    {
        EXPERIMENT_KIND,
        f"{EXPERIMENT_KIND}_inferred",
        "finetuning",
        "forecasting",
        "classification",
        "regression",
        "automl",
    }
)
_WORKFLOW = "workflowType=machine_learning"

VIEW_ID = "autotune-leaderboard"
VIEW_NAME = "autotune leaderboard"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_ID}"
# Metric columns after speedup and the objective with its re-measured median, in this order, when some trial has them.
_METRICS = ("step_ms_p50", "peak_mem_gib", "energy_j_per_sample")
_MAX_PARAMS = 16  # a kernel space may have dozens; the view keeps the first ones (the Columns menu has the rest)
_WIDTH = 100  # px: a speedup's whole value and header; the objective's columns get more (below)


def needs_kind(tags: Mapping[str, str]) -> bool:
    """True when an experiment with ``tags`` is not (yet) marked as a model-training experiment."""
    return tags.get(EXPERIMENT_KIND_TAG) not in _TRAINING_KINDS


def runs_link(experiment_id: str) -> str:
    """The experiment's runs page with the leaderboard view, as a link relative to the UI's root."""
    return f"#/experiments/{experiment_id}/runs?{_WORKFLOW}&viewStateShareKey={VIEW_ID}"


def address(tracking_uri: str, link: str) -> str:
    """Where a reader opens ``link``: on the tracking server itself, or on ``mlflow ui`` (port 5000) over a
    local store (``tracking_uri`` with any password already taken out)."""
    if tracking_uri.startswith(("http://", "https://")):
        return f"{tracking_uri.rstrip('/')}/{link}"
    here = tracking_uri == f"sqlite:///{Path.cwd() / 'mlflow.db'}"  # MLflow's default store, which `mlflow ui` opens
    server = "`mlflow ui` in this folder" if here else f"`mlflow ui --backend-store-uri {tracking_uri}`"
    return f"http://127.0.0.1:5000/{link} (with {server} running)"


def artifact_link(experiment_id: str, run_id: str, path: str) -> str:
    """The run's artifact ``path`` open in the UI's artifact viewer, relative to the UI's root."""
    return f"#/experiments/{experiment_id}/runs/{run_id}/artifacts/{quote(path)}?{_WORKFLOW}"


def leaderboard_view(trial_runs: Iterable[Run], created_ms: int, objective: str = THROUGHPUT) -> str:
    """The experiment tag value of the saved view "autotune leaderboard" over ``trial_runs``' columns: trials by
    ``speedup`` (feasible trials only have one: the rest sort last), the ``objective`` metric and its re-measured
    median, the knobs and each trial's outcome."""
    runs = list(trial_runs)
    present = {key for run in runs for key in run.data.metrics}
    again = f"remeasured_{objective}"
    metrics = [SPEEDUP, objective, *(key for key in (again, *_METRICS) if key in present and key != objective)]
    params = list(dict.fromkeys(key for run in runs for key in run.data.params))[:_MAX_PARAMS]
    columns = [
        *(_column("metrics", key) for key in metrics),
        *(_column("params", key) for key in params),
        _column("tags", TAG_OUTCOME),
    ]
    widths = {SPEEDUP: _WIDTH, objective: 9 * len(objective) + 30, again: 9 * len(again) + 30}  # header and value
    state = {
        "orderByKey": _column("metrics", SPEEDUP),
        "orderByAsc": False,
        "selectedColumns": columns,
        "columnOrder": columns,
        "columnWidths": {_column("metrics", key): width for key, width in widths.items() if key in metrics},
    }
    return json.dumps({"name": VIEW_NAME, "createdAt": created_ms, "state": json.dumps(state)})


def _column(kind: str, key: str) -> str:
    """The UI's column id: ``metrics.`throughput```."""
    return f"{kind}.`{key}`"
