"""Ranking, defined once: which trial is better, by how much over the default, and the Pareto front.

Only feasible measured trials rank (:attr:`TrialRecord.feasible`), by their first objective's ranked
value (the re-measured median where there is one); ties go to the earlier trial. ``speedup`` compares a
value with the PyTorch-default trial's so that > 1 is better in either direction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from autotune.records.trial import TrialRecord

__all__ = ["better", "dominates", "order", "pareto_front", "speedup"]


def better(a: float, b: float, direction: str, margin: float = 0.0) -> bool:
    """``a`` is better than ``b`` by more than ``margin`` (a fraction of ``a``) for an objective to ``direction``
    (maximize or minimize); strictly better with no margin."""
    return a > b + margin * abs(a) if direction == "maximize" else a < b - margin * abs(a)


def speedup(value: float | None, baseline: float | None, direction: str) -> float | None:
    """``value`` over the PyTorch-default ``baseline``, so that > 1 is better in either direction."""
    if value is None or baseline is None:
        return None
    top, bottom = (value, baseline) if direction == "maximize" else (baseline, value)
    return top / bottom if bottom > 0 else None


def order(records: Iterable[TrialRecord], direction: str) -> list[TrialRecord]:
    """The feasible measured ``records``, best first (ties: the earlier trial first)."""
    sign = -1.0 if direction == "maximize" else 1.0
    ranked = [r for r in records if r.measured and r.feasible]
    return sorted(ranked, key=lambda r: (sign * (r.value or 0.0), r.number))


def dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[str]) -> bool:
    """``a`` is no worse than ``b`` on every objective and better on at least one."""
    pairs = list(zip(a, b, directions, strict=True))
    return all(not better(y, x, d) for x, y, d in pairs) and any(better(x, y, d) for x, y, d in pairs)


def pareto_front(records: Iterable[TrialRecord], directions: Sequence[str]) -> frozenset[int]:
    """Numbers of the feasible measured records that no other one dominates (O(n^2): hundreds, not millions)."""
    points = {
        r.number: [v for v in r.objectives if v is not None]
        for r in records
        if r.measured and r.feasible and None not in r.objectives
    }
    return frozenset(
        number
        for number, point in points.items()
        if not any(dominates(other, point, directions) for n, other in points.items() if n != number)
    )
