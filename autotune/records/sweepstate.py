"""What a study says of the sweeps that ran on it: the budget the last one ran with, whether its finishing stages
completed and over how many trials, and where its sampler started from.

The sweep writes these on the study (:mod:`autotune.records.schema` names them); ``status`` and the other views
read them here, never from the study's attributes themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import optuna

from autotune.records import schema

__all__ = ["SweepState"]


@dataclass(frozen=True)
class SweepState:
    """The sweep-level facts stored on a study (None where no sweep recorded one)."""

    budget: int | None = None  # measured trials in all that the last sweep ran with
    timeout_s: float | None = None  # its time limit
    finished_over: int | None = None  # the search's measured trials when its finishing stages last ran to the end
    warm_start: dict[str, Any] | None = None  # {"study", "trials", "skipped"}: the evidence its sampler started from

    @classmethod
    def read(cls, study: optuna.Study) -> SweepState:
        """The facts as ``study`` holds them now (one read of its attributes)."""
        attrs = study.user_attrs
        budget = attrs.get(schema.STUDY_ATTR_BUDGET)
        budget = budget if isinstance(budget, dict) else {}
        finished = attrs.get(schema.STUDY_ATTR_FINISHED)
        measured = finished.get("measured") if isinstance(finished, dict) else None
        warm_start = attrs.get(schema.STUDY_ATTR_WARM_START)
        return cls(
            budget=_whole(budget.get("trials")),
            timeout_s=budget.get("timeout_s") if isinstance(budget.get("timeout_s"), int | float) else None,
            finished_over=_whole(measured),
            warm_start=warm_start if isinstance(warm_start, dict) else None,
        )

    @staticmethod
    def budget_attr(trials: int | None, timeout_s: float | None) -> dict[str, Any]:
        """The value a sweep stores as its budget (:data:`~autotune.records.schema.STUDY_ATTR_BUDGET`)."""
        return {"trials": trials, "timeout_s": timeout_s}


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
