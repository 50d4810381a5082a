"""Profile before and after, the parent's side: which trials of a study to profile (the PyTorch default and the
winner), each run again in an isolated process, and the two profiles side by side.

Modules, lowest first:

- ``table``: two summaries side by side, as text for a terminal (100 columns) and for MLflow.
- ``study``: which trials of a study to profile (default and winner), run in isolated processes.

What runs inside the trial process (capturing the profile, its breakdown by kernel category) is
:mod:`autotune.trial.profiler`; this package never runs in a trial.
"""

from __future__ import annotations

from autotune.profiling.study import DEFAULT_STEPS, ProfileFailed, StudyProfile, pick_trials, profile_study, space_of

__all__ = ["DEFAULT_STEPS", "ProfileFailed", "StudyProfile", "pick_trials", "profile_study", "space_of"]
