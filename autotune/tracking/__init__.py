"""MLflow mirror of a sweep: one parent run per study, one child run per trial.

The Optuna study is the truth; MLflow is a mirror of it. Nothing here may make a sweep fail: when
the tracking server is restarting or unreachable, calls warn once per outage on stderr (through
``logging``) and return ``None``; the sweep keeps going and catches up later by comparing
:meth:`SweepTracker.logged_trial_numbers` with the study. Programming errors (``TypeError``,
``AttributeError`` ...) still raise.

Only :class:`mlflow.tracking.MlflowClient` is used, never MLflow's fluent API: its active-run and
tracking-URI globals would leak between sweeps and threads that share one process.

Modules, lowest first (each imports only those above it), and where to add what (run names and
their abbreviations are in :mod:`autotune.labels`, shared with the progress lines):

- ``schema``: tag keys, run statuses, MLflow's value limits, metric filtering; a new tag key goes here.
- ``store``: the client behind the outage guard (warn once, cooling, HTTP retries, tracking URI); new
  kinds of store errors go here, never experiment or run logic.
- ``ui``: what MLflow's UI (3.17) reads: the experiment kind, the saved view "autotune leaderboard" (its
  columns and sort), links into the UI; what was found in MLflow's UI code is written down there.
- ``description``: the markdown of the parent run's description, while the sweep runs and once it ended.
- ``experiment``: the experiment ``autotune/<study>``, marked as a model-training experiment, and its view.
- ``sweep_run``: the sweep's parent run; its description; a report artifact in ``finish`` (or as one more
  entry of the ``artifacts`` the sweep passes to :meth:`SweepTracker.finish`); what comes after the sweep
  (``autotune profile``'s table and traces) through ``add``.
- ``trial_runs``: the trials' child runs, each a trial's record rendered (``TrialBatch``: a new metric on them
  goes there); ``speedup``, re-measured medians and outcome tags brought up to the records by ``sync``, at the
  sweep's end and when the default trial is measured. Nothing here ranks or divides: :mod:`autotune.records` does.
- ``tracker``: :class:`SweepTracker`, the facade the sweep calls; each public method runs one guarded call.
"""

from __future__ import annotations

from autotune.labels import trial_run_name
from autotune.tracking.fields import (
    CHANGED_PARAM_TAG_PREFIX,
    TAG_PARENT,
    TAG_REASON,
    TAG_ROLE,
    TAG_STATUS,
    TAG_STUDY,
    TAG_TRIAL,
)
from autotune.tracking.store import HTTP_ENV_DEFAULTS, resolve_tracking_uri
from autotune.tracking.tracker import SweepTracker

__all__ = [
    "CHANGED_PARAM_TAG_PREFIX",
    "HTTP_ENV_DEFAULTS",
    "TAG_PARENT",
    "TAG_REASON",
    "TAG_ROLE",
    "TAG_STATUS",
    "TAG_STUDY",
    "TAG_TRIAL",
    "SweepTracker",
    "resolve_tracking_uri",
    "trial_run_name",
]
