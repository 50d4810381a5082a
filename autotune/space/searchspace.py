"""The validated search space (:class:`Space`): what a sweep asks of it, configuration by configuration.

Per-param work (suggesting, encoding for Optuna, listing values) is delegated to
``autotune.space.params``; this module walks the params in order and applies ``when`` and the
feasibility rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.errors import AutotuneError
from autotune.expr import Expression
from autotune.space.params import ParamSpec, _decode, _encode, _sampler_view, _suggest, any_compiled, combinations
from autotune.space.settings import (
    Budget,
    Device,
    Direction,
    FinalistsSpec,
    KernelSpec,
    Objective,
    SamplerSpec,
    WorkloadSpec,
)

if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution

__all__ = ["Space"]


@dataclass(frozen=True)
class Space:
    """A validated search space, as :func:`load_space` builds it from YAML.

    ``text`` is the file's content as read (log it with the sweep). Params are kept in declaration
    order, which is the order they are chosen in (a ``when`` names an earlier param). ``finalists``
    is the finishing stage that re-tries the best configurations with Inductor options (None: none).
    """

    path: Path
    text: str
    workload: WorkloadSpec
    device: Device
    objectives: tuple[Objective, ...]
    constraints: tuple[Expression, ...]
    feasibility: tuple[Expression, ...]
    budget: Budget
    sampler: SamplerSpec
    params: dict[str, ParamSpec]
    kernels: tuple[KernelSpec, ...] = ()  # Triton kernels whose configs are params too
    finalists: FinalistsSpec | None = None
    # Ordinal params the study stores as choice indices: one made before values were stored (see params.py).
    legacy_ordinals: frozenset[str] = frozenset()
    gpus_per_trial: int = 1  # ranks each trial runs as, one GPU each (autotune.trial.ranks)

    @property
    def is_multi_objective(self) -> bool:
        """Whether more than one metric is optimised (Optuna then keeps a Pareto front)."""
        return len(self.objectives) > 1

    @property
    def directions(self) -> list[Direction]:
        """The objectives' directions, in order, as ``optuna.create_study(directions=...)`` takes them."""
        return [objective.direction for objective in self.objectives]

    @property
    def compiles(self) -> bool:
        """Whether some trial of its sweep may compile: a search configuration (a ``compile_mode`` other than none),
        or a finalist given a compile mode."""
        return any_compiled(self.params) or (self.finalists is not None and self.finalists.compile_mode is not None)

    @property
    def ordinals(self) -> dict[str, tuple[Any, ...]]:
        """The choices of each ordinal param Optuna stores by value (legacy ones left out)."""
        return {
            name: spec.choices
            for name, spec in self.params.items()
            if spec.kind == "ordinal" and spec.choices is not None and name not in self.legacy_ordinals
        }

    def stored_as(self, trials: Iterable[optuna.trial.FrozenTrial]) -> Space:
        """This space, encoding its ordinals as ``trials`` (a study's) stored them.

        A study made before ordinals were stored by value holds them as indices (an
        ``IntDistribution``); its new trials must too, since Optuna refuses a second distribution
        for a param name in one study.
        """
        from optuna.distributions import IntDistribution  # deferred: ~0.15 s; validating a space needs no Optuna

        ordinal = {name for name, spec in self.params.items() if spec.kind == "ordinal"}
        legacy = {
            name
            for trial in trials
            for name, distribution in trial.distributions.items()
            if name in ordinal and isinstance(distribution, IntDistribution)
        }
        return replace(self, legacy_ordinals=frozenset(legacy))

    def suggest(self, trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        """Ask Optuna for every active param, in declaration order; return the params.

        Fixed params are returned without asking Optuna (they are not in ``trial.params``). Optuna
        stores an ordinal param as its value (a categorical over its choices), or as its choice's
        index in a study made before that (:attr:`legacy_ordinals`).
        """
        params: dict[str, Any] = {}
        for spec in self.params.values():
            if spec.is_active(params):
                params[spec.name] = _suggest(trial, spec, spec.name in self.legacy_ordinals)
        return params

    def default_params(self) -> dict[str, Any]:
        """The configuration that stands for "PyTorch defaults" in this space.

        Each active param takes its ``default`` (see :class:`ParamSpec`: the explicit one, else
        PyTorch's value for a knob, e.g. precision=default, memory_format=contiguous,
        compile_mode=none, cuDNN flags and fused_optimizer false, matmul_precision=auto, when the
        space contains it), else its first choice or the low end of its range. batch_size has no
        PyTorch default: give it ``default:`` (e.g. the workload's usual batch) or it takes the
        first choice / low end. The result is not checked against the feasibility rules.
        """
        params: dict[str, Any] = {}
        for spec in self.params.values():
            if spec.is_active(params):
                params[spec.name] = spec.default_value()
        return params

    def optuna_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Optuna's values for params (fixed params left out; a legacy ordinal -> its index).

        For ``study.enqueue_trial(space.optuna_params(p))``. A name outside the space or a value
        the param cannot take raises AutotuneError.
        """
        out: dict[str, Any] = {}
        for name, value in params.items():
            spec = self._spec(name)
            if not spec.contains(value):
                raise AutotuneError(f"param {name}={value!r} is not valid: expected {spec.describe()}")
            if spec.kind != "fixed":
                out[name] = _encode(spec, value, name in self.legacy_ordinals)
        return out

    def params_from_optuna(
        self, values: Mapping[str, Any], distributions: Mapping[str, BaseDistribution]
    ) -> dict[str, Any]:
        """The inverse of :meth:`optuna_params`: the params of a trial, from its ``params`` and ``distributions``.

        Each value is read by the distribution it was stored with (an ordinal stored as an index
        by a study made before values were stored, too). Fixed params are added back; params whose
        ``when`` is not met are left out.
        """
        params: dict[str, Any] = {}
        for spec in self.params.values():
            if not spec.is_active(params):
                continue
            if spec.kind == "fixed":
                params[spec.name] = spec.first()
            elif spec.name in values:
                params[spec.name] = _decode(spec, values[spec.name], distributions.get(spec.name))
        return params

    def sampler_params(self, params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, BaseDistribution]] | None:
        """A configuration measured elsewhere (another study's params), as this space's sampler sees it.

        Each active param takes its value from ``params``, else its ``default`` (what a study that
        did not search it ran with); params outside this space are ignored. Returns the params and
        distributions a sampler reads, ordinals as choice indices (:mod:`autotune.search.samplerview`), or
        None where a value is not one this space's param can take, or a missing param has no default.
        """
        chosen: dict[str, Any] = {}
        values: dict[str, Any] = {}
        distributions: dict[str, BaseDistribution] = {}
        for spec in self.params.values():
            if not spec.is_active(chosen):
                continue
            if spec.name not in params and spec.default is None:
                return None
            value = params.get(spec.name, spec.default)
            if not spec.contains(value):
                return None
            chosen[spec.name] = value
            view = _sampler_view(spec, value)
            if view is not None:
                distributions[spec.name], values[spec.name] = view
        return values, distributions

    def is_feasible(self, params: Mapping[str, Any]) -> tuple[bool, str | None]:
        """Check the feasibility rules: ``(True, None)``, or ``(False, the first failing rule)``.

        A rule that names a param absent from ``params`` (its ``when`` is not met) does not apply;
        a rule that cannot be evaluated (division by zero, say) fails with the reason appended.
        """
        for rule in self.feasibility:
            if not rule.names <= params.keys():
                continue
            try:
                holds = bool(rule.evaluate(params))
            except AutotuneError as exc:
                return False, f"{rule.text} ({exc})"
            if not holds:
                return False, rule.text
        for kernel in self.kernels:
            if kernel.rule is not None and not kernel.rule.evaluate(kernel.values(dict(params))):
                return False, f"{kernel.alias}: {kernel.rule.text}"
        return True, None

    def grid(self) -> list[dict[str, Any]]:
        """Every configuration of the discrete params (decoded), respecting ``when``.

        Not filtered by the feasibility rules (:func:`~autotune.space.configurations.list_configurations`
        is). A float range without a step raises AutotuneError.
        """
        configs = combinations(self.params.values())
        assert configs is not None  # only a limit gives None
        return configs

    def _spec(self, name: str) -> ParamSpec:
        spec = self.params.get(name)
        if spec is None:
            known = ", ".join(self.params) or "none"
            raise AutotuneError(f"param {name!r} is not in the search space {self.path.name} (params: {known})")
        return spec
