"""The sweep: an Optuna study whose trials run as isolated, measured trial jobs (or replayed records).

Data flows one way: the space suggests params -> a proposal is answered from an earlier measurement,
rejected by a feasibility rule, or run by the executor -> the TrialResult is written to the study
and told to Optuna -> mirrored to MLflow. The Optuna storage is the truth: several workers (one per
GPU, or on several hosts through PostgreSQL) can share a study, and re-running the same command
resumes it. After the proposal loop, finishing stages work over what the study holds.

Where things live (and where to add what):

- ``options.py``: :class:`SweepOptions` (what the command line adds to a space) and :class:`SweepSummary`.
- ``setup.py``: opening or resuming the study, the budget, the default configuration queued first.
- ``storage.py``: the Optuna storage (SQLite in WAL mode), worker identity, heartbeats.
- ``lease.py``: leases in the study's database (``autotune_leases``): what runs once per study, who searches.
- ``orphans.py``: the running trials of dead workers failed and queued again, once, at every stop check.
- the record model is :mod:`autotune.records`; a worker reads its study incrementally through ``ctx.records``
  (:class:`~autotune.records.StudyRecords`): a new per-proposal question about the study is answered there,
  not by re-reading trials.
- ``proposals.py``: ask the sampler, decode params, answer repeats, reject infeasible configurations.
- ``informed.py``: the informed start queued once the default is measured; ``expert.py``: what it picks (what an
  expert would try first on the device, and its twin in the other half precision).
- ``coverage.py``: what a finite space has left to measure: the budget it caps, the sweep's end when
  every configuration is measured, the untried configuration queued after a repeat.
- ``executors.py``: how a measured trial runs (isolated trial processes, or replayed records);
  ``compilegain.py``: when it stops early (``pruning_for``: the pruning line, and the compile-gain bound);
  ``devicegate.py``: a ``--gpus`` worker's device check before each trial.
- ``recorder.py``: a finished trial written to the study, told to Optuna, logged to MLflow; a new
  per-trial attribute is written here (its name in :mod:`autotune.records.schema`, read back by the records).
- ``remeasure.py`` and later finishing stages: each a :class:`~autotune.sweep.context.Stage` run
  in order after the loop (see ``Sweep._stages`` in ``loop.py``), once per study (``finishing.py``).
- ``summary.py``: the sweep's summary, and the MLflow parent run completed.
- ``fulldisk.py`` (with ``reserve.py`` and ``kept.py``): a full disk loses no measured trial and stops the
  sweep in one line; ``ending.py``: a worker ended by an exception ends its MLflow run and names a storage fault.
- ``loop.py``: :class:`~autotune.sweep.loop.Sweep`, one worker wiring these together.
- ``run.py``: :func:`run_sweep`, the entry: one worker here, or one process per GPU (``gpus.py``, ``gpuworker.py``).
"""

from __future__ import annotations

from autotune.storage.rdb import open_storage
from autotune.sweep.loop import Sweep
from autotune.sweep.options import SweepOptions, SweepSummary
from autotune.sweep.run import run_sweep

__all__ = ["Sweep", "SweepOptions", "SweepSummary", "open_storage", "run_sweep"]
