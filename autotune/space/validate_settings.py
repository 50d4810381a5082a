"""Validating the sections other than params: workload, objective, budget, sampler, finalists, expressions.

Each function reads one section into its typed value (``autotune.space.settings``), reporting
problems and returning None (or ``_INVALID``) for a section that is wrong.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from autotune import workloads
from autotune.errors import AutotuneError
from autotune.expr import Expression
from autotune.knobs import inductor
from autotune.knobs.compile import COMPILE_MODES
from autotune.space.params import ParamSpec, any_compiled
from autotune.space.problems import (
    _INVALID,
    _check_keys,
    _did_you_mean,
    _one_of,
    _quote,
    _Report,
    _section,
    _show_type,
)
from autotune.space.settings import (
    DEFAULT_TRIAL_TIMEOUT_S,
    DIRECTIONS,
    METRICS,
    SAMPLERS,
    Budget,
    FinalistsSpec,
    Objective,
    SamplerSpec,
    WorkloadSpec,
    parse_duration,
)

__all__: list[str] = []

_WORKLOAD_KEYS = ("name", "preset", "args")
_OBJECTIVE_KEYS = ("metric", "direction")
_BUDGET_KEYS = ("trials", "timeout", "trial_timeout")
_SAMPLER_KEYS = ("name", "seed", "cost_aware")
_FINALISTS_KEYS = ("top", "compile_mode", "inductor")
_FINALIST_COMPILE_MODES = tuple(mode for mode in COMPILE_MODES if mode != "none")


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
    build = None if replay else _resolve(name, report)
    known = workloads.presets(build) if build is not None and name in workloads.BUILTIN else workloads.PRESETS
    preset = _one_of(section.get("preset", "full"), known, "workload.preset", report)
    args = section.get("args") or {}
    if not isinstance(args, dict):
        report.add("workload.args", f"expected a mapping of keyword arguments, got {_show_type(args)}")
        args = {}
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
    """Fixed args must be build arguments, not also params, and pass the build function's own check; required
    arguments must be given."""
    accepted = workloads.workload_params(build) if build is not None else None
    problems_before = len(report.problems)
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
    searched = accepted is not None and any(name in accepted for name in params)
    if build is not None and workload.args and not searched and len(report.problems) == problems_before:
        _check_fixed_args(workload, build, report)


def _check_fixed_args(workload: WorkloadSpec, build: Callable[..., Any], report: _Report) -> None:
    """The build function's own check of its fixed args (:func:`autotune.workloads.check_args`); skipped where a
    searched workload param could change what is valid."""
    try:
        workloads.check_args(build, workload.preset, dict(workload.args))
    except AutotuneError as exc:
        report.add("workload.args", str(exc))


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
    raw = section.get("trials")
    trials = raw if raw is None or (isinstance(raw, int) and not isinstance(raw, bool) and raw >= 1) else _INVALID
    if trials is _INVALID:
        report.add("budget.trials", f"{_quote(raw)} is not a whole number >= 1")
    timeout = _duration(section.get("timeout"), "budget.timeout", report)
    trial_timeout = _duration(section.get("trial_timeout", DEFAULT_TRIAL_TIMEOUT_S), "budget.trial_timeout", report)
    if _INVALID in (trials, timeout, trial_timeout) or not (trials is None or isinstance(trials, int)):
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
    cost_aware = section.get("cost_aware")
    if cost_aware is not None and not isinstance(cost_aware, bool):
        report.add("sampler.cost_aware", f"{_quote(cost_aware)} is not true or false")
        return None
    if cost_aware and name == "grid":
        report.add("sampler.cost_aware", "the grid sampler measures every point in order: nothing to weigh by cost")
        return None
    return None if name is _INVALID else SamplerSpec(name, seed, cost_aware)


# --- finalists --------------------------------------------------------------------------------


def _finalists(data: Mapping[str, Any], params: Mapping[str, ParamSpec] | None, report: _Report) -> Any:
    """The ``finalists:`` section: None when absent, _INVALID (reported) when wrong."""
    if data.get("finalists") is None:
        return None
    section = _section(data, "finalists", report)
    if section is None:
        return _INVALID
    _check_keys(section, _FINALISTS_KEYS, "finalists", report)
    top = section.get("top", 1)
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        report.add("finalists.top", f"{_quote(top)} is not a whole number >= 1")
        top = _INVALID
    mode = section.get("compile_mode")
    if mode is not None:
        mode = _one_of(mode, _FINALIST_COMPILE_MODES, "finalists.compile_mode", report)
    options = _inductor_options(section.get("inductor"), report)
    if mode is None and options == {}:
        report.add("finalists", "nothing to re-try the finalists with: give inductor: options, compile_mode:, or both")
        return _INVALID
    if mode is None and options not in ({}, _INVALID) and params is not None and not any_compiled(params):
        report.add("finalists.inductor", "the space never compiles (compile_mode): set finalists.compile_mode too")
        return _INVALID
    if _INVALID in (top, mode, options):
        return _INVALID
    return FinalistsSpec(top, mode, options)


def _inductor_options(raw: Any, report: _Report) -> Any:
    """``finalists.inductor``: the options typed ({} when absent), or _INVALID with each problem reported."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not raw:
        report.add("finalists.inductor", f"expected a mapping of Inductor options, got {_show_type(raw)}")
        return _INVALID
    found = inductor.problems(raw)
    for name, problem in found:
        report.add(f"finalists.inductor.{name}", problem)
    return _INVALID if found else inductor.parse(raw)


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
