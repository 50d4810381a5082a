"""The sweep: an Optuna study whose trials run as isolated, measured trial jobs (or replayed records).

Data flows one way: the space suggests params -> a proposal is answered from an earlier measurement,
rejected by a feasibility rule, or run by the executor -> the TrialResult is written to the study
and told to Optuna -> mirrored to MLflow. The Optuna storage is the truth: several workers (one per
GPU, or on several hosts through PostgreSQL) can share a study, and re-running the same command
resumes it. After the proposal loop, finishing stages work over what the study holds.

Where things live (and where to add what), from the ground up; a module imports only from those above it in this
list, and code inside the package imports modules by their path, never this face:

- ``options.py``: :class:`SweepOptions` (what the command line adds to a space), :class:`SweepSummary`, a worker's
  ``Role`` and the study's name. ``context.py``: what one worker's parts share, and the ``Stage`` protocol.
- ``workers/``: what workers sharing one study agree on: leases (what runs once per study, who still searches),
  orphaned and interrupted trials queued again, the device gate of a ``--gpus`` worker.
- ``measurers.py``: how a trial of the sweep is measured (in an isolated trial process, or answered from replayed
  records).
- ``proposals/``: the proposal side: ask the sampler and answer repeats and rule-breakers (``proposer.py``; a new
  per-proposal decision goes there), what a finite space has left (``coverage.py``), the informed start, the compile
  ahead and parked trials, pruning before the compile.
- ``setup.py``: opening or resuming the study, the budget, the default configuration queued first.
- ``recorder.py``: a finished trial written to the study, told to Optuna, logged to MLflow; a new per-trial attribute
  is written here (its name in :mod:`autotune.records.schema`, read back by the records).
- ``faults/``: storage faults a sweep outlives: a full disk (the disk reserve, measurements kept outside the study),
  a worker ended by an exception. A new storage failure class is handled there.
- ``stages/``: the finishing stages, run once per study after the search (re-measure, finalists, rehearsal, profile,
  report, summary) and the time limit that leaves them room. A new stage is a module there, listed in
  ``stages/lineup.py``.
- ``trial_turn.py``: one trial's turn: ask, then measure now or park, record, the progress line.
- ``loop.py``: :class:`~autotune.sweep.loop.Sweep`, one worker wiring these together: the search, then the stages.
- ``gpus/``: ``--gpus``: one worker process per GPU under an orchestrator; a new message between a worker and its
  orchestrator is a dataclass in ``gpus/messages.py``.
- ``launch.py``: :func:`run_sweep`, the entry that launches the workers: one here, or one process per GPU (``gpus/``).

The record model is :mod:`autotune.records`; a worker reads its study incrementally through ``ctx.records``
(:class:`~autotune.records.StudyRecords`): a new per-proposal question about the study is answered there, not by
re-reading trials. The Optuna storage itself is :mod:`autotune.storage` (SQLite in WAL mode, worker identity,
heartbeats).
"""

from __future__ import annotations

from autotune.storage.rdb import open_storage
from autotune.sweep.launch import run_sweep
from autotune.sweep.loop import Sweep
from autotune.sweep.options import SweepOptions, SweepSummary

__all__ = ["Sweep", "SweepOptions", "SweepSummary", "open_storage", "run_sweep"]
