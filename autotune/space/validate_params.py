"""Validating the params section: each YAML param -> a :class:`ParamSpec`, with its ``when`` and default.

A param named after a knob (:data:`autotune.knobs.KNOB_SPECS`) is checked against that knob's
values; any other name must be an argument of the workload's build function (any name goes when
replaying). ``_params`` is the section's entry point; ``_check_grid`` adds what sampler ``grid`` needs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autotune import workloads
from autotune.errors import AutotuneError
from autotune.knobs.checkpointing import DEFAULT_BUDGET
from autotune.knobs.registry import KNOB_SPECS, Knobs
from autotune.knobs.spec import KnobSpec, bounds_text
from autotune.space.params import ParamKind, ParamSpec, _is_number, _member, _show
from autotune.space.problems import _INVALID, _check_keys, _did_you_mean, _quote, _Report, _section, _show_type
from autotune.space.settings import WorkloadSpec

__all__: list[str] = []

_PARAM_KEYS = ("choices", "ordinal", "low", "high", "log", "step", "default", "when")
# PyTorch's own behaviour for each knob (Knobs' None for a cuDNN flag means "untouched", i.e. False).
_PYTORCH_DEFAULTS: dict[str, Any] = {
    **Knobs().to_params(),
    "cudnn_benchmark": False,
    "cudnn_deterministic": False,
}


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
        if name == "inductor":  # minutes of compile a trial: tried on the finalists only, never searched
            report.add(
                where, "Inductor options are not searched: set them in the finalists: section (finalists.inductor)"
            )
            continue
        _check_param_name(str(name), where, context, report)
        spec = _param(str(name), raw, where, report)
        if spec is not None and "when" in (raw if isinstance(raw, dict) else {}):
            when = _when(str(name), raw["when"], where, specs, context.declared, report)
            spec = dataclasses.replace(spec, when=when)
        if spec is not None:
            specs[spec.name] = _with_implicit_default(spec, context)
    _check_compile_scope(specs, report)
    _check_memory_budget(specs, report)
    return specs


def _check_compile_scope(specs: Mapping[str, ParamSpec], report: _Report) -> None:
    """``compile_scope: blocks`` only where ``compile_mode`` is not none: together they are an invalid combination
    (:meth:`autotune.knobs.Knobs.check_combination`), and every trial the sampler drew so would fail."""
    scope = specs.get("compile_scope")
    if scope is not None and _member("blocks", scope.choices or ()):
        _check_compiled_only(specs, scope, "blocks", "eager compiles no blocks", report)


def _check_memory_budget(specs: Mapping[str, ParamSpec], report: _Report) -> None:
    """An ``activation_memory_budget`` below 1.0 only where ``compile_mode`` is not none, as ``compile_scope``."""
    budget = specs.get("activation_memory_budget")
    if budget is None:
        return
    lowered = [v for v in budget.choices or () if v != DEFAULT_BUDGET] if budget.choices is not None else []
    if budget.choices is None or lowered:  # a range, or a list with a budget below 1.0
        shown = f"a budget of {lowered[0]:g}" if lowered else "a budget below 1.0"
        _check_compiled_only(specs, budget, shown, "the budget is the compiler's", report)


def _check_compiled_only(
    specs: Mapping[str, ParamSpec], spec: ParamSpec, shown: str, why: str, report: _Report
) -> None:
    """Report ``spec`` when its value ``shown`` can meet ``compile_mode`` none (an invalid combination)."""
    where, mode = f"params.{spec.name}", specs.get("compile_mode")
    if mode is None:  # compile_mode at its default: eager, always
        report.add(
            where,
            f"{shown} needs a compile_mode, which this space leaves at none ({why}): "
            "declare compile_mode before it and add when: {compile_mode: [default]}",
        )
        return
    modes = mode.choices or ()
    if _member("none", modes) and _member("none", spec.when.get("compile_mode", modes)):
        compiled = ", ".join(str(m) for m in modes if m != "none") or "default"
        report.add(
            where,
            f"{shown} with compile_mode none is an invalid combination ({why}): "
            f"add when: {{compile_mode: [{compiled}]}}",
        )


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
        elif knob.kind is float:
            report.add(where, f"{_quote(value)} is not a number {bounds_text(knob)}")
        else:
            report.add(where, f"{_quote(value)} is not {_int_range(knob.minimum)}")
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
    if knob is not None and not _knob_takes_range(knob, low, high, where, report):
        return False
    if low > high:
        report.add(where, f"low={low} is greater than high={high}")
        return False
    return True


def _knob_takes_range(knob: KnobSpec, low: int | float, high: int | float, where: str, report: _Report) -> bool:
    """Whether ``knob`` takes a low/high range with these ends: a float knob within its bounds, an int knob in ints
    from its minimum; a knob of choices none."""
    if knob.kind is float:
        outside = (knob.minimum is not None and low < knob.minimum) or (
            knob.maximum is not None and high > knob.maximum
        )
        if outside:
            report.add(where, f"{knob.name} takes numbers {bounds_text(knob)}: low={low}, high={high} are not")
        return not outside
    if knob.kind is not int:
        allowed = ", ".join(_show(c) for c in knob.choices or ())
        report.add(where, f"{knob.name} takes one of {allowed}: a low/high range is not valid")
        return False
    lowest = knob.minimum if knob.minimum is not None else 1
    if not (isinstance(low, int) and isinstance(high, int) and low >= lowest):
        report.add(where, f"{knob.name} takes {_int_range(lowest, plural=True)}: low={low}, high={high} are not")
        return False
    return True


def _int_range(minimum: int | float | None, plural: bool = False) -> str:
    """``a positive int`` / ``positive ints``, or ``an int >= 0`` / ``ints >= 0``, as an int knob's bound says."""
    if minimum is None or minimum == 1:
        return "positive ints" if plural else "a positive int"
    return f"ints >= {minimum}" if plural else f"an int >= {minimum}"


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
