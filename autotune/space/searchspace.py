"""The validated search space (:class:`Space`): what a sweep asks of it, configuration by configuration.

Per-param work (suggesting, encoding for Optuna, listing values) is delegated to
``autotune.space.params``; this module walks the params in order and applies ``when`` and the
feasibility rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.errors import AutotuneError
from autotune.expr import Expression
from autotune.space.params import ParamSpec, _decode, _encode, _suggest
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

    @property
    def is_multi_objective(self) -> bool:
        """Whether more than one metric is optimised (Optuna then keeps a Pareto front)."""
        return len(self.objectives) > 1

    @property
    def directions(self) -> list[Direction]:
        """The objectives' directions, in order, as ``optuna.create_study(directions=...)`` takes them."""
        return [objective.direction for objective in self.objectives]

    def suggest(self, trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        """Ask Optuna for every active param, in declaration order; return the decoded params.

        Fixed params are returned without asking Optuna (they are not in ``trial.params``); an
        ordinal param is an integer index in ``trial.params`` and its value here.
        """
        params: dict[str, Any] = {}
        for spec in self.params.values():
            if spec.is_active(params):
                params[spec.name] = _suggest(trial, spec)
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
                params[spec.name] = spec.default if spec.default is not None else spec.first()
        return params

    def optuna_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Optuna's values for decoded params (ordinal -> index; fixed params left out).

        For ``study.enqueue_trial(space.optuna_params(p))``. A name outside the space or a value
        the param cannot take raises AutotuneError.
        """
        out: dict[str, Any] = {}
        for name, value in params.items():
            spec = self._spec(name)
            if not spec.contains(value):
                raise AutotuneError(f"param {name}={value!r} is not valid: expected {spec.describe()}")
            if spec.kind != "fixed":
                out[name] = _encode(spec, value)
        return out

    def params_from_optuna(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The inverse of :meth:`optuna_params`: decoded params from a trial's ``params``.

        Fixed params are added back; params whose ``when`` is not met are left out.
        """
        params: dict[str, Any] = {}
        for spec in self.params.values():
            if not spec.is_active(params):
                continue
            if spec.kind == "fixed":
                params[spec.name] = spec.first()
            elif spec.name in values:
                params[spec.name] = _decode(spec, values[spec.name])
        return params

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

        Not filtered by the feasibility rules. A float range without a step raises AutotuneError.
        """
        configs: list[dict[str, Any]] = [{}]
        for spec in self.params.values():
            values = spec.values()
            expanded: list[dict[str, Any]] = []
            for config in configs:
                if spec.is_active(config):
                    expanded.extend({**config, spec.name: value} for value in values)
                else:
                    expanded.append(config)
            configs = expanded
        return configs

    def _spec(self, name: str) -> ParamSpec:
        spec = self.params.get(name)
        if spec is None:
            known = ", ".join(self.params) or "none"
            raise AutotuneError(f"param {name!r} is not in the search space {self.path.name} (params: {known})")
        return spec
