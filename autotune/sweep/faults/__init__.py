"""Faults of the study's storage that a sweep outlives: nothing measured is lost, and it stops in one line.

- ``full_disk.py``: :class:`GuardedRecorder`, around the worker's recorder: a full disk loses no measured trial,
  measures none twice, and stops the sweep with one line that says how to resume.
- ``disk_reserve.py``: space set aside beside a SQLite study, given back the moment its disk is found full.
- ``kept_measurements.py``: measurements kept outside a study whose disk was full, recorded onto their trials
  when the sweep resumes.
- ``ended_on_error.py``: a worker that ends on an exception: the storage fault behind it named in one line, its
  MLflow run ended.

A new failure class of the storage (what it looks like: :mod:`autotune.storage.faults`) is handled here, in a module
of its own, and wired in by the loop or the trial turn. A failed trial is no fault of this kind: it is a
:class:`~autotune.measurement.TrialResult` with its status, recorded by :mod:`autotune.sweep.recorder`.
"""
