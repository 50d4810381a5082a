"""Search spaces: a YAML file -> a typed, validated :class:`Space`.

One validation pass collects every problem in the file and reports them together, one per line,
as ``FILE: key.path: problem``. Unknown keys are errors everywhere (with a "did you mean"), so a
typo never silently does nothing. See ``search_spaces/*.yaml`` for commented examples.

Params come in five kinds (:class:`ParamSpec`)::

    precision: [default, fp32, bf16]                   # categorical (a list is shorthand)
    memory_format: {choices: [contiguous, channels_last], default: contiguous}
    batch_size: {low: 32, high: 512, log: true}        # int range (low/high ints); step too
    lr_scale: {low: 0.1, high: 1.0, log: true}         # float range (low or high a float)
    BLOCK_M: {choices: [64, 128, 256], ordinal: true}  # ordered: searched as an integer index
    cudnn_benchmark: true                              # fixed value, never searched
    cudnn_deterministic: {choices: [true, false], when: {compile_mode: [none]}}   # conditional

A param named after a knob (:data:`autotune.knobs.KNOB_SPECS`) takes that knob's values; any other
name must be a keyword argument of the workload's build function.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml

from autotune import workloads
from autotune.errors import AutotuneError
from autotune.expr import Expression
from autotune.knobs import KNOB_SPECS, Knobs

if TYPE_CHECKING:
    import optuna

__all__ = [
    "DEVICES",
    "METRICS",
    "SAMPLERS",
    "Budget",
    "Objective",
    "ParamSpec",
    "SamplerSpec",
    "Space",
    "SpaceError",
    "WorkloadSpec",
    "load_space",
    "parse_duration",
]

ParamKind = Literal["categorical", "int", "float", "ordinal", "fixed"]
Direction = Literal["maximize", "minimize"]
Device = Literal["cpu", "cuda", "auto"]

DEVICES: tuple[Device, ...] = ("cpu", "cuda", "auto")
DIRECTIONS: tuple[Direction, ...] = ("maximize", "minimize")
SAMPLERS = ("auto", "tpe", "gp", "cmaes", "random", "grid")  # auto: see autotune.samplers
# What a trial reports; constraints may also name others (kernel and replay workloads add theirs).
METRICS = (
    "throughput", "step_ms_p50", "step_ms_p90", "step_cv", "peak_mem_gib", "compile_s",
    "energy_j_per_sample", "power_w_mean", "gpu_util_mean", "overhead_s",
)  # fmt: skip
DEFAULT_TRIAL_TIMEOUT_S = 600.0

_TOP_KEYS = ("workload", "device", "objective", "constraints", "feasibility", "budget", "sampler", "params")
_WORKLOAD_KEYS = ("name", "preset", "args")
_OBJECTIVE_KEYS = ("metric", "direction")
_BUDGET_KEYS = ("trials", "timeout", "trial_timeout")
_SAMPLER_KEYS = ("name", "seed")
_PARAM_KEYS = ("choices", "ordinal", "low", "high", "log", "step", "default", "when")
# PyTorch's own behaviour for each knob (Knobs' None for a cuDNN flag means "untouched", i.e. False).
_PYTORCH_DEFAULTS: dict[str, Any] = {
    **Knobs().to_params(),
    "cudnn_benchmark": False,
    "cudnn_deterministic": False,
}
_INVALID = object()  # a value that failed validation (its problem is already reported)
_DURATION = re.compile(r"(?:(\d+(?:\.\d*)?)h)?(?:(\d+(?:\.\d*)?)m)?(?:(\d+(?:\.\d*)?)s)?")


# ---------------------------------------------------------------------------------------------
# The typed space


def _same(a: Any, b: Any) -> bool:
    """Equality that keeps booleans apart from numbers (``True == 1`` in Python)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _member(value: Any, values: Iterable[Any]) -> bool:
    return any(_same(value, v) for v in values)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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

    def values(self) -> tuple[Any, ...]:
        """Every value of a discrete param; a continuous float range raises AutotuneError."""
        if self.choices is not None:
            return self.choices
        assert isinstance(self.low, int | float) and isinstance(self.high, int | float)
        if self.kind == "int":
            return tuple(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        if self.step is None:
            raise AutotuneError(
                f"param {self.name}: the float range {self.low}..{self.high} has no finite set of values; "
                "give it a step or choices"
            )
        count = math.floor((self.high - self.low) / self.step + 1e-9) + 1
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


@dataclass(frozen=True)
class Objective:
    """One metric of a trial's result to optimise."""

    metric: str
    direction: Direction


@dataclass(frozen=True)
class Budget:
    """How long a sweep runs: a trial count and/or wall time, and the limit for each trial."""

    trials: int | None = None
    timeout_s: float | None = None
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S


@dataclass(frozen=True)
class SamplerSpec:
    """The Optuna sampler by name (tpe, gp, cmaes, random, grid) and its seed."""

    name: str = "auto"
    seed: int | None = None


@dataclass(frozen=True)
class WorkloadSpec:
    """The workload to train: built-in name or ``package.module:function``, preset, fixed args."""

    name: str
    preset: str = "full"
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Space:
    """A validated search space, as :func:`load_space` builds it from YAML.

    ``text`` is the file's content as read (log it with the sweep). Params are kept in declaration
    order, which is the order they are chosen in (a ``when`` names an earlier param).
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
            if spec.kind == "ordinal":
                assert spec.choices is not None
                out[name] = next(i for i, c in enumerate(spec.choices) if _same(c, value))
            elif spec.kind != "fixed":
                out[name] = value
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
                value = values[spec.name]
                params[spec.name] = spec.choices[int(value)] if spec.kind == "ordinal" else value  # type: ignore[index]
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


def _suggest(trial: optuna.trial.BaseTrial, spec: ParamSpec) -> Any:
    """Ask Optuna for one param and decode its answer."""
    if spec.kind == "fixed":
        return spec.first()
    if spec.kind == "ordinal":
        assert spec.choices is not None
        return spec.choices[trial.suggest_int(spec.name, 0, len(spec.choices) - 1)]
    if spec.kind == "categorical":
        assert spec.choices is not None
        return trial.suggest_categorical(spec.name, list(spec.choices))
    assert spec.low is not None and spec.high is not None
    if spec.kind == "int":
        return trial.suggest_int(spec.name, int(spec.low), int(spec.high), step=int(spec.step or 1), log=spec.log)
    return trial.suggest_float(spec.name, spec.low, spec.high, step=spec.step, log=spec.log)


# ---------------------------------------------------------------------------------------------
# Durations


def parse_duration(text: str | int | float) -> float:
    """Seconds in a duration: ``90``, ``"90s"``, ``"30m"``, ``"8h"``, ``"1h30m"``, ``"1.5h"``."""
    bad = AutotuneError(f"duration {text!r} is not valid: use seconds or a form like 90s, 30m, 8h, 1h30m")
    if isinstance(text, bool):
        raise bad
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        compact = str(text).strip().lower().replace(" ", "")
        try:
            seconds = float(compact)
        except ValueError:
            match = _DURATION.fullmatch(compact)
            if not compact or match is None:
                raise bad from None
            hours, minutes, secs = (float(g or 0) for g in match.groups())
            seconds = hours * 3600 + minutes * 60 + secs
    if not math.isfinite(seconds) or seconds <= 0:
        raise AutotuneError(f"duration {text!r} is not valid: it must be a positive time")
    return seconds


# ---------------------------------------------------------------------------------------------
# Loading and validation


class SpaceError(AutotuneError):
    """A search space with problems; ``problems`` lists them, one ``FILE: key.path: problem`` each."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


class _Report:
    """Collects problems as ``FILE: key.path: problem`` lines."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[str] = []

    def add(self, where: str, problem: str) -> None:
        self.problems.append(f"{self.file}: {where}: {problem}" if where else f"{self.file}: {problem}")


def _show(value: Any) -> str:
    """A value as it is written in YAML: true, null, bf16, 128."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    return str(value)


def _quote(value: Any) -> str:
    """A value in a message: text quoted ('bf17'), anything else as YAML writes it (0, true)."""
    return repr(value) if isinstance(value, str) else _show(value)


def _did_you_mean(name: Any, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(name), list(options), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_keys(section: Mapping[Any, Any], allowed: Sequence[str], where: str, report: _Report) -> None:
    for key in section:
        if key not in allowed:
            hint = _did_you_mean(key, allowed) or f" (expected one of {', '.join(allowed)})"
            report.add(f"{where}.{key}" if where else str(key), f"unknown key{hint}")


def _section(data: Mapping[str, Any], key: str, report: _Report) -> dict[Any, Any] | None:
    """A mapping under ``key``: empty when absent or blank, None (reported) when not a mapping."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        report.add(key, f"expected a mapping of settings, got {_show_type(value)}")
        return None
    return value


def _show_type(value: Any) -> str:
    return {list: "a list", dict: "a mapping", str: f"the text {value!r}"}.get(type(value), repr(value))


def _one_of(value: Any, options: Sequence[str], where: str, report: _Report) -> Any:
    if value not in options:
        report.add(where, f"{_quote(value)} is not one of {', '.join(options)}{_did_you_mean(value, options)}")
        return _INVALID
    return value


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader that records duplicate keys (plain YAML keeps the last one silently)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[tuple[str, int]] = []


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[str] = set()
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
            if key_node.value in seen:
                loader.duplicates.append((key_node.value, key_node.start_mark.line + 1))
            seen.add(key_node.value)
    return loader.construct_mapping(node, deep=True)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_yaml(path: Path, report: _Report) -> tuple[str, Any]:
    """The file's text and parsed YAML; a missing file or a syntax error is one problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        report.add("", "file not found")
        return "", None
    except (OSError, UnicodeDecodeError) as exc:
        report.add("", f"cannot read the file ({exc})")
        return "", None
    loader = _Loader(text)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}" if mark is not None else "YAML"
        report.add(line, f"invalid YAML: {getattr(exc, 'problem', None) or exc}")
        return text, None
    finally:
        loader.dispose()
    for key, line in loader.duplicates:
        report.add(f"line {line}", f"duplicate key {key!r} (YAML would keep only the last one)")
    return text, data


def load_space(path: str | Path, *, replay: bool = False) -> Space:
    """Read and validate a search space; every problem in the file is reported in one SpaceError.

    With ``replay=True`` (recorded results answer the trials) the workload is not imported and
    any param name is allowed; knob params are still checked.
    """
    path = Path(path)
    report = _Report(str(path))
    text, data = _read_yaml(path, report)
    if report.problems and data is None:
        raise SpaceError(report.problems)
    space = _build_space(path, text, data, report, replay)
    if report.problems or space is None:
        raise SpaceError(report.problems)
    return space


def _build_space(path: Path, text: str, data: Any, report: _Report, replay: bool) -> Space | None:
    if not isinstance(data, dict):
        report.add("", f"expected a mapping with workload:, objective:, params: ..., got {_show_type(data)}")
        return None
    _check_keys(data, _TOP_KEYS, "", report)
    workload, build = _workload(data, report, replay)
    context = _ParamContext.make(workload, build, replay, data.get("params"))
    device = _one_of(data.get("device", "auto"), DEVICES, "device", report)
    objectives = _objectives(data.get("objective"), report)
    constraints = _expressions(data.get("constraints"), "constraints", None, report)
    # Feasibility rules name params; when the params section is broken, that is reported instead.
    feasibility = _expressions(data.get("feasibility"), "feasibility", context.declared or None, report)
    budget = _budget(data, report)
    sampler = _sampler(data, report)
    params = _params(data, context, report)
    if workload is not None and params is not None:
        _check_workload_args(workload, build, params, report)
    if sampler is not None and sampler.name == "grid" and params:
        _check_grid(params, report)
    if (
        report.problems
        or workload is None
        or params is None
        or objectives is None
        or constraints is None
        or feasibility is None
        or budget is None
        or sampler is None
    ):
        return None
    return Space(path, text, workload, device, objectives, constraints, feasibility, budget, sampler, params)


# --- workload ---------------------------------------------------------------------------------


def _workload(data: Mapping[str, Any], report: _Report, replay: bool) -> tuple[WorkloadSpec | None, Any]:
    """The workload section and its build function (None when replaying or when it cannot load)."""
    section = _section(data, "workload", report)
    if section is None:
        return None, None
    _check_keys(section, _WORKLOAD_KEYS, "workload", report)
    name = section.get("name")
    if not isinstance(name, str) or not name:
        builtin = ", ".join(workloads.BUILTIN)
        report.add("workload.name", f"required: a built-in workload ({builtin}) or package.module:function")
        return None, None
    preset = _one_of(section.get("preset", "full"), workloads.PRESETS, "workload.preset", report)
    args = section.get("args") or {}
    if not isinstance(args, dict):
        report.add("workload.args", f"expected a mapping of keyword arguments, got {_show_type(args)}")
        args = {}
    build = None if replay else _resolve(name, report)
    return WorkloadSpec(name, preset if preset is not _INVALID else "full", dict(args)), build


def _resolve(name: str, report: _Report) -> Callable[..., Any] | None:
    try:
        return workloads.resolve(name)
    except AutotuneError as exc:
        report.add("workload.name", str(exc))
    except Exception as exc:  # a user's module that fails on import: bad input, not our bug
        report.add("workload.name", f"cannot load workload {name!r}: {type(exc).__name__}: {exc}")
    return None


def _required_args(build: Callable[..., Any]) -> list[str]:
    return [
        p.name
        for p in inspect.signature(build).parameters.values()
        if p.default is p.empty and p.name != "preset" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _check_workload_args(
    workload: WorkloadSpec, build: Callable[..., Any] | None, params: Mapping[str, ParamSpec], report: _Report
) -> None:
    """Fixed args must be build arguments, not also params; required arguments must be given."""
    accepted = workloads.workload_params(build) if build is not None else None
    for key in workload.args:
        where = f"workload.args.{key}"
        if key == "preset":
            report.add(where, "set the preset with workload.preset")
        elif accepted is not None and key not in accepted:
            takes = ", ".join(accepted) or "nothing but preset"
            report.add(where, f"not an argument of workload {workload.name!r} (it takes: {takes})")
        elif key in params:
            report.add(where, f"{key!r} is also in params; give it in one place")
    if build is not None:
        for name in _required_args(build):
            if name not in workload.args and name not in params:
                report.add("workload.args", f"workload {workload.name!r} needs {name!r}: give it here or in params")


# --- objective, budget, sampler, expressions --------------------------------------------------


def _objectives(raw: Any, report: _Report) -> tuple[Objective, ...] | None:
    """One objective or a list of them; absent means maximise throughput."""
    if raw is None:
        return (Objective("throughput", "maximize"),)
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        report.add("objective", "expected at least one {metric, direction}")
        return None
    wheres = [f"objective[{i}]" for i in range(len(items))] if isinstance(raw, list) else ["objective"]
    objectives = [_objective(item, where, report) for item, where in zip(items, wheres, strict=True)]
    metrics = [o.metric for o in objectives if o is not None]
    for metric in sorted({m for m in metrics if metrics.count(m) > 1}):
        report.add("objective", f"metric {metric!r} appears more than once")
    return None if None in objectives else tuple(o for o in objectives if o is not None)


def _objective(raw: Any, where: str, report: _Report) -> Objective | None:
    if not isinstance(raw, dict):
        report.add(where, f"expected {{metric: ..., direction: maximize|minimize}}, got {_show_type(raw)}")
        return None
    _check_keys(raw, _OBJECTIVE_KEYS, where, report)
    metric = raw.get("metric")
    if not isinstance(metric, str) or not metric:
        report.add(f"{where}.metric", f"required: the metric to optimise, e.g. {', '.join(METRICS[:3])}")
    direction = raw.get("direction")
    if direction is None:
        report.add(f"{where}.direction", "required: maximize or minimize")
    else:
        direction = _one_of(direction, DIRECTIONS, f"{where}.direction", report)
    if not isinstance(metric, str) or not metric or direction not in DIRECTIONS:
        return None
    return Objective(metric, direction)


def _budget(data: Mapping[str, Any], report: _Report) -> Budget | None:
    section = _section(data, "budget", report)
    if section is None:
        return None
    _check_keys(section, _BUDGET_KEYS, "budget", report)
    trials = section.get("trials")
    if trials is not None and (not isinstance(trials, int) or isinstance(trials, bool) or trials < 1):
        report.add("budget.trials", f"{_quote(trials)} is not a whole number >= 1")
        trials = _INVALID
    timeout = _duration(section.get("timeout"), "budget.timeout", report)
    trial_timeout = _duration(section.get("trial_timeout", DEFAULT_TRIAL_TIMEOUT_S), "budget.trial_timeout", report)
    if _INVALID in (trials, timeout, trial_timeout):
        return None
    return Budget(trials, timeout, trial_timeout)


def _duration(raw: Any, where: str, report: _Report) -> Any:
    if raw is None:
        return None
    try:
        return parse_duration(raw)
    except AutotuneError as exc:
        report.add(where, str(exc))
        return _INVALID


def _sampler(data: Mapping[str, Any], report: _Report) -> SamplerSpec | None:
    section = _section(data, "sampler", report)
    if section is None:
        return None
    _check_keys(section, _SAMPLER_KEYS, "sampler", report)
    name = _one_of(section.get("name", "auto"), SAMPLERS, "sampler.name", report)
    seed = section.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        report.add("sampler.seed", f"{_quote(seed)} is not an int")
        return None
    return None if name is _INVALID else SamplerSpec(name, seed)


def _expressions(raw: Any, key: str, allowed: Sequence[str] | None, report: _Report) -> tuple[Expression, ...] | None:
    """A list of expressions (a single string is a list of one); names checked against ``allowed``."""
    items = [raw] if isinstance(raw, str) else raw if raw is not None else []
    if not isinstance(items, list):
        report.add(key, f"expected a list of expressions, got {_show_type(items)}")
        return None
    out: list[Expression] = []
    for i, item in enumerate(items):
        where = f"{key}[{i}]"
        if not isinstance(item, str):
            report.add(where, f"{_quote(item)} is not an expression; write it as text, e.g. 'peak_mem_gib <= 70'")
            continue
        try:
            expression = Expression(item)
        except AutotuneError as exc:
            report.add(where, str(exc))
            continue
        out.append(expression)
        for name in sorted(expression.names - set(allowed)) if allowed is not None else ():
            report.add(where, f"{name!r} is not a param of this space{_did_you_mean(name, allowed or ())}")
    return tuple(out)


# --- params -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ParamContext:
    """What param validation needs to know about the rest of the space."""

    workload: str
    build_args: dict[str, Any] | None  # None: any name goes (replay) or the workload did not load
    replay: bool
    declared: tuple[str, ...]  # every param name in the file, valid or not, in order

    @classmethod
    def make(
        cls, workload: WorkloadSpec | None, build: Callable[..., Any] | None, replay: bool, raw_params: Any
    ) -> _ParamContext:
        args = workloads.workload_params(build) if build is not None else None
        declared = tuple(str(name) for name in raw_params) if isinstance(raw_params, dict) else ()
        return cls(workload.name if workload else "?", args, replay, declared)


def _params(data: Mapping[str, Any], context: _ParamContext, report: _Report) -> dict[str, ParamSpec] | None:
    section = _section(data, "params", report)
    if section is None:
        return None
    if not section:
        report.add("params", "no params to tune: add at least one (e.g. precision: [default, bf16])")
        return None
    specs: dict[str, ParamSpec] = {}
    for name, raw in section.items():
        where = f"params.{name}"
        _check_param_name(str(name), where, context, report)
        spec = _param(str(name), raw, where, report)
        if spec is not None and "when" in (raw if isinstance(raw, dict) else {}):
            when = _when(str(name), raw["when"], where, specs, context.declared, report)
            spec = dataclasses.replace(spec, when=when)
        if spec is not None:
            specs[spec.name] = _with_implicit_default(spec, context)
    return specs


def _check_param_name(name: str, where: str, context: _ParamContext, report: _Report) -> None:
    if name in KNOB_SPECS or context.replay or context.build_args is None or name in context.build_args:
        return
    options = [*KNOB_SPECS, *context.build_args]
    takes = ", ".join(context.build_args) or "none"
    hint = _did_you_mean(name, options) or f" (knobs: {', '.join(KNOB_SPECS)}; {context.workload} takes: {takes})"
    report.add(where, f"{name!r} is neither a knob nor an argument of workload {context.workload!r}{hint}")


def _param(name: str, raw: Any, where: str, report: _Report) -> ParamSpec | None:
    """One param from its YAML: a list (categorical), a mapping, or a scalar (fixed)."""
    if isinstance(raw, list):
        choices = _choices(name, raw, where, report)
        return None if choices is None else ParamSpec(name, "categorical", choices)
    if isinstance(raw, dict):
        return _param_mapping(name, raw, where, report)
    if raw is None:
        report.add(where, "no value: give a value, a list of choices or {low: ..., high: ...}")
        return None
    value = _coerce(name, raw, where, report)
    return None if value is _INVALID else ParamSpec(name, "fixed", (value,), default=value)


def _param_mapping(name: str, raw: dict[Any, Any], where: str, report: _Report) -> ParamSpec | None:
    _check_keys(raw, _PARAM_KEYS, where, report)
    has_range = "low" in raw or "high" in raw
    if "choices" in raw and has_range:
        report.add(where, "give either choices or low/high, not both")
        return None
    if "choices" in raw:
        spec = _choice_param(name, raw, where, report)
    elif has_range:
        spec = _range_param(name, raw, where, report)
    else:
        report.add(where, "expected choices: [...] or low: and high:")
        return None
    if spec is None or "default" not in raw:
        return spec
    default = _coerce(name, raw["default"], f"{where}.default", report)
    if default is _INVALID:
        return None
    if not spec.contains(default):
        report.add(f"{where}.default", f"{_quote(default)} is not {spec.describe()}")
        return None
    return dataclasses.replace(spec, default=default)


def _choice_param(name: str, raw: dict[Any, Any], where: str, report: _Report) -> ParamSpec | None:
    ordinal = raw.get("ordinal", False)
    if not isinstance(ordinal, bool):
        report.add(f"{where}.ordinal", f"{_quote(ordinal)} is not true or false")
        return None
    for key in ("log", "step"):
        if key in raw:
            report.add(f"{where}.{key}", "applies to low/high ranges only, not to choices")
    choices = _choices(name, raw["choices"], f"{where}.choices", report)
    return None if choices is None else ParamSpec(name, "ordinal" if ordinal else "categorical", choices)


def _choices(name: str, raw: Any, where: str, report: _Report) -> tuple[Any, ...] | None:
    if not isinstance(raw, list) or not raw:
        report.add(where, f"expected a non-empty list of choices, got {_show_type(raw)}")
        return None
    values = [_coerce(name, item, where, report) for item in raw]
    if _INVALID in values:
        return None
    for i, value in enumerate(values):
        if _member(value, values[:i]):
            report.add(where, f"{_quote(value)} is listed twice")
            return None
    return tuple(values)


def _coerce(name: str, value: Any, where: str, report: _Report) -> Any:
    """A YAML value checked (and for knobs coerced) for param ``name``; _INVALID when it is wrong."""
    if value is not None and not isinstance(value, str | int | float | bool):
        report.add(where, f"{value!r} is not a plain value (text, number, true/false)")
        return _INVALID
    knob = KNOB_SPECS.get(name)
    if knob is None:
        return value
    try:
        return getattr(Knobs.from_params({name: value}), name)
    except AutotuneError:
        if knob.choices is not None:
            allowed = ", ".join(_show(c) for c in knob.choices)
            report.add(
                where,
                f"{_quote(value)} is not one of {allowed}{_did_you_mean(value, map(str, knob.choices))}",
            )
        else:
            report.add(where, f"{_quote(value)} is not a positive {knob.kind.__name__}")
        return _INVALID


def _number(raw: Any, where: str, report: _Report) -> int | float | None:
    """An int or float; numeric text is accepted too (YAML reads 1e-3 as text: it wants 1.0e-3)."""
    if raw is None:
        report.add(where, "required for a range")
        return None
    number: int | float | None = raw if _is_number(raw) else None
    if isinstance(raw, str):
        for kind in (int, float):
            try:
                number = kind(raw)
                break
            except ValueError:
                continue
    if number is None or not math.isfinite(number):
        report.add(where, f"{_quote(raw)} is not a finite number")
        return None
    return number


def _range_param(name: str, raw: dict[Any, Any], where: str, report: _Report) -> ParamSpec | None:
    low, high = (
        _number(raw.get("low"), f"{where}.low", report),
        _number(raw.get("high"), f"{where}.high", report),
    )
    if "ordinal" in raw:
        report.add(f"{where}.ordinal", "applies to choices only, not to low/high ranges")
    if low is None or high is None or not _range_allowed(name, low, high, where, report):
        return None
    kind: ParamKind = "int" if isinstance(low, int) and isinstance(high, int) else "float"
    log = raw.get("log", False)
    if not isinstance(log, bool):
        report.add(f"{where}.log", f"{_quote(log)} is not true or false")
        return None
    if log and low <= 0:
        report.add(f"{where}.log", f"a log range needs low > 0, got low={low}")
        return None
    step = _step(raw.get("step"), kind, low, high, log, where, report)
    if step is _INVALID:
        return None
    if kind == "float":
        low, high = float(low), float(high)
    return ParamSpec(name, kind, None, low, high, log, step)


def _range_allowed(name: str, low: int | float, high: int | float, where: str, report: _Report) -> bool:
    knob = KNOB_SPECS.get(name)
    if knob is not None and knob.kind is not int:
        allowed = ", ".join(_show(c) for c in knob.choices or ())
        report.add(where, f"{name} takes one of {allowed}: a low/high range is not valid")
        return False
    if knob is not None and not (isinstance(low, int) and isinstance(high, int) and low >= 1):
        report.add(where, f"{name} takes positive ints: low={low}, high={high} are not")
        return False
    if low > high:
        report.add(where, f"low={low} is greater than high={high}")
        return False
    return True


def _step(
    raw: Any, kind: ParamKind, low: int | float, high: int | float, log: bool, where: str, report: _Report
) -> Any:
    """The range's step (None when absent), or _INVALID when it is wrong for the range."""
    if raw is None:
        return None
    where = f"{where}.step"
    ok = isinstance(raw, int) if kind == "int" else _is_number(raw)
    if not ok or isinstance(raw, bool) or raw <= 0:
        report.add(where, f"{_quote(raw)} is not a positive {'int' if kind == 'int' else 'number'}")
        return _INVALID
    if log:
        report.add(where, "a log range cannot have a step (Optuna samples it continuously in log space)")
        return _INVALID
    if kind == "int" and (high - low) % raw:
        report.add(where, f"high - low = {high - low} is not a multiple of step={raw}")
        return _INVALID
    return raw if kind == "int" else float(raw)


def _when(
    name: str,
    raw: Any,
    where: str,
    earlier: Mapping[str, ParamSpec],
    declared: Sequence[str],
    report: _Report,
) -> dict[str, tuple[Any, ...]]:
    """``when: {other: [values]}``: other must be declared earlier and the values ones it takes."""
    where = f"{where}.when"
    if not isinstance(raw, dict) or not raw:
        report.add(where, f"expected {{other_param: [values]}}, got {_show_type(raw)}")
        return {}
    conditions: dict[str, tuple[Any, ...]] = {}
    for other, values in raw.items():
        other = str(other)
        spec = earlier.get(other)
        if spec is None:
            _report_bad_reference(name, other, f"{where}.{other}", declared, report)
            continue
        items = values if isinstance(values, list) else [values]
        coerced = [_coerce(other, v, f"{where}.{other}", report) for v in items]
        for value in coerced:
            if value is not _INVALID and not spec.contains(value):
                report.add(f"{where}.{other}", f"{_quote(value)} is not a value {other} takes ({spec.describe()})")
        conditions[other] = tuple(coerced)
    return conditions


def _report_bad_reference(name: str, other: str, where: str, declared: Sequence[str], report: _Report) -> None:
    if other == name:
        report.add(where, "a param cannot depend on itself")
    elif other not in declared:
        report.add(where, f"{other!r} is not a param of this space{_did_you_mean(other, declared)}")
    elif declared.index(other) > declared.index(name):
        report.add(where, f"{other!r} is declared after {name!r}: declare it first (params are chosen in order)")
    # else: declared earlier but invalid, and that problem is already reported


def _with_implicit_default(spec: ParamSpec, context: _ParamContext) -> ParamSpec:
    """Fill ``default`` with PyTorch's value for a knob, or the build function's, when the space has it."""
    if spec.default is not None:
        return spec
    for candidate in (_PYTORCH_DEFAULTS.get(spec.name), (context.build_args or {}).get(spec.name)):
        if candidate is not None and spec.contains(candidate):
            return dataclasses.replace(spec, default=candidate)
    return spec


def _check_grid(params: Mapping[str, ParamSpec], report: _Report) -> None:
    for spec in params.values():
        if spec.kind == "float" and spec.step is None:
            report.add(
                f"params.{spec.name}",
                "sampler 'grid' cannot search a continuous range: give a step or choices",
            )
