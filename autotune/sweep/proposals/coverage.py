"""How much of a finite space a study has measured: the budget it can use, its end, what to queue after a repeat.

A space whose configurations can be listed (:func:`autotune.space.list_configurations`) holds a
known number of them. A budget larger than that cannot be spent: the budget is capped at what the
study can still measure, and the sweep stops, saying so, once every configuration is measured. Without
that cap it would ask on until 100 proposals in a row had needed no run, each ask leaving a trial row
in the study.

Before that end, a proposal that needs no run (a repeat of a measured configuration, one another
worker is measuring, one a rule rejects) still costs a trial row: Optuna writes it when it is asked
for. Where the budget left covers every untried configuration, all of them will be measured
anyway, so what the sampler would propose next no longer decides anything: the proposer queues the
untried configuration nearest to the repeat, and the next ask (of any worker) measures it. Each such
row is then followed by a new measurement, so a lone worker writes fewer of them than configurations.
Workers asking at once can each write one before the same new measurement (their repeats queue one
configuration between them), and each may write one more at the end, while the last configuration is
measured elsewhere: at most as many per worker as configurations. Where the budget is smaller than
the space, nothing is queued: the sampler's proposals stand, and a seeded sweep proposes what it
always did.

The study is the truth: measured and running trials are every worker's. Params are compared with
floats rounded to 12 digits, as :meth:`~autotune.space.ParamSpec.values` lists a stepped float range,
so a value a sampler computed as ``0.1 * 3`` is the listed 0.3.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from autotune.space import Configurations, Space, list_configurations

__all__ = ["Coverage"]

_Key = tuple[tuple[str, Any], ...]


def _value(value: Any) -> Any:
    return round(value, 12) if isinstance(value, float) else value


def _key(params: Mapping[str, Any]) -> _Key:
    return tuple(sorted((name, _value(value)) for name, value in params.items()))


def _configurations(count: int) -> str:
    return "its one configuration" if count == 1 else f"all {count} configurations"


class Coverage:
    """The configurations of a finite space, and which of them trials have measured (see the module docstring)."""

    def __init__(self, configurations: Configurations) -> None:
        self.configurations = configurations
        self._by_key = {_key(config): config for config in configurations.feasible}

    @classmethod
    def of(cls, space: Space) -> Coverage | None:
        """The coverage of ``space``; None where it is infinite or too large to list."""
        configurations = list_configurations(space)
        return cls(configurations) if configurations is not None else None

    @property
    def size(self) -> int:
        """How many configurations a sweep can measure (the feasibility rules applied)."""
        return len(self._by_key)

    def untried(
        self, measured: Iterable[Mapping[str, Any]], running: Iterable[Mapping[str, Any]] = ()
    ) -> list[dict[str, Any]]:
        """The configurations neither ``measured`` nor ``running`` (params of trials), in grid order."""
        taken = {_key(params) for params in (*measured, *running)}
        return [config for key, config in self._by_key.items() if key not in taken]

    def budget_cap(self, measured: Sequence[Mapping[str, Any]]) -> int:
        """The budget that measures every configuration: the ``measured`` trials so far and one per untried
        configuration (a measured trial outside this space, of a resumed study whose space changed, counts too)."""
        return len(measured) + len(self.untried(measured))

    def exhausted(self, measured: Sequence[Mapping[str, Any]], running: Sequence[Mapping[str, Any]]) -> str | None:
        """Why the sweep stops, once no configuration is left untried; else None.

        One that another worker is measuring is not left to this one: it would only repeat it.
        """
        if self.untried(measured, running):
            return None
        ruled_out = self.configurations.ruled_out
        if self.size == 0:
            return f"search space exhausted: the feasibility rules rule out all {ruled_out} configurations"
        rest = f" ({ruled_out} more ruled out by the feasibility rules)" if ruled_out else ""
        if running_elsewhere := len(self.untried(measured)):
            measured_count = self.size - running_elsewhere
            return (
                f"search space exhausted: {measured_count} of {self.size} configurations measured, "
                f"the other {running_elsewhere} being measured by other workers{rest}"
            )
        return f"search space exhausted: {_configurations(self.size)} measured{rest}"

    def nearest(self, untried: list[dict[str, Any]], params: Mapping[str, Any], number: int) -> dict[str, Any]:
        """The untried configuration that differs from ``params`` (a repeat) in the fewest params.

        Where several are as near, trial ``number`` picks among them: two workers queueing at once hold
        different trials, so they rarely queue the same configuration.
        """
        distances = [_distance(config, params) for config in untried]
        fewest = min(distances)
        closest = [config for config, distance in zip(untried, distances, strict=True) if distance == fewest]
        return closest[number % len(closest)]


def _distance(config: Mapping[str, Any], params: Mapping[str, Any]) -> int:
    """How many params differ, counting one that only one of the two has."""
    names = config.keys() | params.keys()
    return sum(
        1 for name in names if name not in config or name not in params or _value(config[name]) != _value(params[name])
    )
