"""Typed params (:class:`ParamSpec`) and how each is encoded for the Optuna sampler.

This is where "how a param is encoded for Optuna" lives: :func:`_suggest` asks Optuna for one
param, :func:`_encode` / :func:`_decode` turn a value into the value Optuna stores and back, and
:meth:`ParamSpec.values` lists a discrete param's values for a grid.

Optuna stores every param as its real value, so its dashboard and ``trials_dataframe()`` show a
batch of 16, not an index: an ordinal param is a categorical over its choices in the storage. Its
order reaches the sampler through :mod:`autotune.search.samplerview`, which shows the sampler each
ordinal as the index of its choice. Studies made before that change stored an ordinal as the
index itself (an ``IntDistribution``): ``as_index`` keeps suggesting them that way (Optuna refuses
two distributions for one param name in a study), and :func:`_decode` reads each trial by its
own distribution.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from autotune.errors import AutotuneError

if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution

__all__ = ["ParamKind", "ParamSpec", "any_compiled", "combinations"]

ParamKind = Literal["categorical", "int", "float", "ordinal", "fixed"]


def _same(a: Any, b: Any) -> bool:
    """Equality that keeps booleans apart from numbers (``True == 1`` in Python)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _member(value: Any, values: Iterable[Any]) -> bool:
    return any(_same(value, v) for v in values)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _show(value: Any) -> str:
    """A value as it is written in YAML: true, null, bf16, 128."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    return str(value)


@dataclass(frozen=True)
class ParamSpec:
    """One searched (or fixed) parameter.

    ``choices`` holds the values of categorical, ordinal and fixed params (a fixed param has one);
    ``low``/``high``/``log``/``step`` describe int and float ranges. ``default`` is the value that
    stands for "not tuned": the explicit ``default:``, else PyTorch's own value for a knob or the
    build function's default for a workload argument when the space contains it, else ``None``.
    ``when`` maps another param's name to the values that make this one present.
    """

    name: str
    kind: ParamKind
    choices: tuple[Any, ...] | None = None
    low: int | float | None = None
    high: int | float | None = None
    log: bool = False
    step: int | float | None = None
    default: Any = None
    when: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    def is_active(self, params: Mapping[str, Any]) -> bool:
        """Whether this param is present given the params chosen before it (its ``when``)."""
        return all(name in params and _member(params[name], values) for name, values in self.when.items())

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is one this param can take."""
        if self.choices is not None:
            return _member(value, self.choices)
        assert self.low is not None and self.high is not None
        if not _is_number(value) or not self.low <= value <= self.high:
            return False
        if self.kind == "int":
            return isinstance(value, int) and (value - self.low) % (self.step or 1) == 0
        if self.step is None:
            return True
        index = (value - self.low) / self.step
        return math.isclose(index, round(index), abs_tol=1e-9)

    def count(self) -> int | None:
        """How many values the param takes, without listing them; None for a float range without a step."""
        if self.choices is not None:
            return len(self.choices)
        assert isinstance(self.low, int | float) and isinstance(self.high, int | float)
        if self.kind == "int":
            return (int(self.high) - int(self.low)) // int(self.step or 1) + 1
        if self.step is None:
            return None
        return math.floor((self.high - self.low) / self.step + 1e-9) + 1

    def values(self) -> tuple[Any, ...]:
        """Every value of a discrete param; a continuous float range raises AutotuneError."""
        if self.choices is not None:
            return self.choices
        assert isinstance(self.low, int | float) and isinstance(self.high, int | float)
        if self.kind == "int":
            return tuple(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        count = self.count()
        if count is None or self.step is None:
            raise AutotuneError(
                f"param {self.name}: the float range {self.low}..{self.high} has no finite set of values; "
                "give it a step or choices"
            )
        return tuple(round(self.low + i * self.step, 12) for i in range(count))

    def describe(self) -> str:
        """The values in words, for error messages: ``one of a, b`` or ``an int in [1, 8]``."""
        if self.choices is not None:
            return "one of " + ", ".join(_show(c) for c in self.choices)
        step = f" with step {self.step}" if self.step is not None else ""
        return f"{'an int' if self.kind == 'int' else 'a number'} in [{self.low}, {self.high}]{step}"

    def first(self) -> Any:
        """The first choice, or the low end of a range."""
        return self.choices[0] if self.choices is not None else self.low

    def default_value(self) -> Any:
        """The space's default: ``default:`` where given, else the first choice or the low end."""
        return self.default if self.default is not None else self.first()

    def index(self, value: Any) -> int | None:
        """The position of ``value`` among the choices (``True`` is not ``1``); None if it is not one."""
        return next((i for i, c in enumerate(self.choices or ()) if _same(c, value)), None)


# ---------------------------------------------------------------------------------------------
# Encoding for Optuna


def _suggest(trial: optuna.trial.BaseTrial, spec: ParamSpec, as_index: bool = False) -> Any:
    """Ask Optuna for one param; an ordinal is asked as a categorical over its real values, or as
    its choice's index where ``as_index`` (a study made before values were stored)."""
    if spec.kind == "fixed":
        return spec.first()
    if spec.kind == "ordinal" and as_index:
        assert spec.choices is not None
        return spec.choices[trial.suggest_int(spec.name, 0, len(spec.choices) - 1)]
    if spec.kind in ("ordinal", "categorical"):
        assert spec.choices is not None
        return trial.suggest_categorical(spec.name, list(spec.choices))
    assert spec.low is not None and spec.high is not None
    if spec.kind == "int":
        return trial.suggest_int(spec.name, int(spec.low), int(spec.high), step=int(spec.step or 1), log=spec.log)
    return trial.suggest_float(spec.name, spec.low, spec.high, step=spec.step, log=spec.log)


def _encode(spec: ParamSpec, value: Any, as_index: bool = False) -> Any:
    """The value Optuna stores for one that ``spec`` contains: itself, or an ordinal's index where ``as_index``."""
    if spec.kind != "ordinal" or not as_index:
        return value
    return spec.index(value)


def _decode(spec: ParamSpec, stored: Any, distribution: BaseDistribution | None) -> Any:
    """The inverse of :func:`_encode`, by the distribution the trial stored the param with.

    An ordinal stored with an ``IntDistribution`` (a study made before values were stored) is the
    index of its choice; anything else is the value itself.
    """
    from optuna.distributions import IntDistribution  # not at import: validating a space needs no Optuna

    if spec.kind == "ordinal" and isinstance(distribution, IntDistribution):
        assert spec.choices is not None
        return spec.choices[int(stored)]
    return stored


def _sampler_view(spec: ParamSpec, value: Any) -> tuple[BaseDistribution, Any] | None:
    """The distribution and value a sampler sees for a param ``spec`` contains (None for a fixed one).

    The distribution is the one :func:`_suggest` asks Optuna with, but an ordinal's is the index of
    its choice, as :class:`autotune.search.samplerview.OrdinalView` shows it to the sampler.
    """
    # deferred: Optuna costs ~0.15 s, and validating a space needs none
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if spec.kind == "fixed":
        return None
    if spec.kind == "ordinal":
        assert spec.choices is not None
        return IntDistribution(0, len(spec.choices) - 1), spec.index(value)
    if spec.kind == "categorical":
        assert spec.choices is not None
        return CategoricalDistribution(list(spec.choices)), value
    assert spec.low is not None and spec.high is not None
    if spec.kind == "int":
        return IntDistribution(int(spec.low), int(spec.high), log=spec.log, step=int(spec.step or 1)), value
    return FloatDistribution(spec.low, spec.high, log=spec.log, step=spec.step), value


def any_compiled(params: Mapping[str, ParamSpec]) -> bool:
    """Whether some configuration of ``params`` compiles: a ``compile_mode`` choice other than none."""
    spec = params.get("compile_mode")
    if spec is None or spec.choices is None:
        return False
    return any(choice != "none" for choice in spec.choices)


def combinations(specs: Iterable[ParamSpec], limit: int | None = None) -> list[dict[str, Any]] | None:
    """Every combination of the params' values (decoded), in declaration order, ``when`` respected.

    Without ``limit``, a float range without a step raises AutotuneError (it has no finite set of
    values). With it, such a range, or more than ``limit`` combinations, gives None, found before
    the values are listed (an int range of a billion values costs nothing).
    """
    configs: list[dict[str, Any]] = [{}]
    for spec in specs:
        active = sum(1 for config in configs if spec.is_active(config))
        if active == 0:
            continue
        if limit is not None:
            count = spec.count()
            if count is None or len(configs) + active * (count - 1) > limit:
                return None
        values = spec.values()
        expanded: list[dict[str, Any]] = []
        for config in configs:
            if spec.is_active(config):
                expanded.extend({**config, spec.name: value} for value in values)
            else:
                expanded.append(config)
        configs = expanded
    return configs
