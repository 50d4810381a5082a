"""Reading and validating a space file: :func:`load_space`, the one pass over every section.

``_build_space`` checks the top-level keys, calls each section's validator (the params section in
``validate_params``, the others in ``validate_settings``), runs the checks that span sections, and
builds the :class:`Space` only when nothing was reported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune.space.problems import _INVALID, SpaceError, _check_keys, _one_of, _Report, _show_type
from autotune.space.searchspace import Space
from autotune.space.settings import DEVICES
from autotune.space.validate_float8 import _check_float8, _float8_filter
from autotune.space.validate_kernels import _kernels
from autotune.space.validate_parallel import _check_data_parallel, _gpus_per_trial
from autotune.space.validate_params import _check_grid, _ParamContext, _params
from autotune.space.validate_settings import (
    _budget,
    _check_workload_args,
    _expressions,
    _finalists,
    _objectives,
    _sampler,
    _workload,
)
from autotune.space.yamlfile import _read_yaml

__all__ = ["load_space"]

_TOP_KEYS = (
    "workload", "device", "objective", "constraints", "feasibility", "budget", "sampler", "params", "kernels",
    "finalists", "float8_filter", "gpus_per_trial",
)  # fmt: skip


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
    kernels, kernel_params = _kernels(data.get("kernels"), context.declared, report)
    finalists = _finalists(data, params, report)
    gpus_per_trial = _gpus_per_trial(data, report)
    if params is not None:
        _check_float8(params, report)
        _check_data_parallel(params, gpus_per_trial, report)
    float8_filter = _float8_filter(data, params, report)
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
        or finalists is _INVALID
        or float8_filter is _INVALID
        or gpus_per_trial is _INVALID
    ):
        return None
    params = {**params, **kernel_params}  # chosen after the space's own params
    if float8_filter is not None:
        params[float8_filter.name] = float8_filter  # after float8, whose value makes it present
    return Space(
        path,
        text,
        workload,
        device,
        objectives,
        constraints,
        feasibility,
        budget,
        sampler,
        params,
        kernels,
        finalists,
        gpus_per_trial=gpus_per_trial,
    )
