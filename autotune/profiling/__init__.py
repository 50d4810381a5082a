"""Profile before and after: torch.profiler over a few steps of the PyTorch-default trial and the winner.

Modules, lowest first:

- ``categories``: a kernel's or op's name -> its category (matmul/conv, attention, norm & elementwise,
  copies, other); a new library's kernel names go here.
- ``breakdown``: the profiler's events -> ms per step by category, GPU idle, data wait, top kernels.
- ``capture``: :func:`capture`, what the trial job calls after its timed window.
- ``table``: two summaries side by side, as text for a terminal (100 columns) and for MLflow.
- ``study``: which trials of a study to profile (default and winner), run in isolated processes.
"""

from __future__ import annotations

from typing import Any

from autotune.profiling.capture import capture

__all__ = ["DEFAULT_STEPS", "ProfileFailed", "StudyProfile", "capture", "pick_trials", "profile_study", "space_of"]
_STUDY_API = frozenset(__all__) - {"capture"}  # in autotune.profiling.study


def __getattr__(name: str) -> Any:
    """The study-level API, imported on first use: every profiling trial imports this package for
    :func:`capture` alone, and should not pay for Optuna and the leaderboard."""
    if name in _STUDY_API:
        from autotune.profiling import study

        return getattr(study, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
