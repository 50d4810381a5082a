"""The configurations a space holds, listed where they are few enough to list.

A space is finite when every param takes countably many values: a list, ``{choices}``, an ordinal, a
fixed value, an int range, a float range with a step. Its configurations are the combinations of
those values, ``when`` respected (a param whose condition is not met is absent, not one more value),
less those a ``feasibility:`` rule rules out. A sweep whose budget reaches that number can measure
every one of them and then has nothing left to try (:mod:`autotune.sweep.proposals.coverage`).

Listing stops at :data:`MAX_LISTED` combinations: past that, no budget a sweep is given comes near
the space's size, and checking each combination against the rules would cost a noticeable share of a
second per thousand (kernel rules are the slowest).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autotune.space.params import combinations

if TYPE_CHECKING:
    from autotune.space.searchspace import Space

__all__ = ["MAX_LISTED", "Configurations", "list_configurations"]

MAX_LISTED = 10_000  # combinations listed at most (before the feasibility rules)


@dataclass(frozen=True)
class Configurations:
    """Every configuration of a finite space that its feasibility rules allow, in grid order."""

    feasible: tuple[dict[str, Any], ...]
    ruled_out: int  # combinations a feasibility rule excludes

    def __len__(self) -> int:
        return len(self.feasible)


def list_configurations(space: Space, limit: int = MAX_LISTED) -> Configurations | None:
    """The configurations of ``space`` a sweep can measure; None where it is infinite or holds more than
    ``limit`` combinations (before the feasibility rules)."""
    listed = combinations(space.params.values(), limit)
    if listed is None:
        return None
    feasible = tuple(config for config in listed if space.is_feasible(config)[0])
    return Configurations(feasible, len(listed) - len(feasible))
