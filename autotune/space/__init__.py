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

Modules, typed values first (they never import the validators), then reading and validation:

- ``params``: :class:`ParamSpec` and how a param is encoded for Optuna (suggest, ordinal index <->
  value, grid values). A new kind of param, or a new encoding, goes here.
- ``settings``: :class:`Objective`, :class:`Budget`, :class:`SamplerSpec`, :class:`WorkloadSpec`,
  :class:`FinalistsSpec` (the ``finalists:`` stage), :func:`parse_duration` and the vocabularies
  (METRICS, DEVICES, SAMPLERS). A new typed setting goes here.
- ``searchspace``: :class:`Space`, the validated whole: suggest, defaults, Optuna round trip,
  feasibility, grid.
- ``configurations``: the configurations a finite space holds (:func:`list_configurations`, feasibility
  applied; None for an infinite or huge space): what a sweep counts to know it has measured them all.
- ``problems``: :class:`SpaceError`, the report that collects problems, and their wording.
- ``yamlfile``: reading the file (duplicate keys and syntax errors reported).
- ``validate``: :func:`load_space` and the one pass over the file. A new top-level key (e.g.
  ``kernels:``) is added to ``_TOP_KEYS`` there and its validator called from ``_build_space``.
- ``validate_settings``: the workload, objective, budget, sampler, finalists and expression sections. A new
  setting's section (e.g. data-path knobs) is validated here.
- ``validate_float8``: the ``float8_filter:`` key (a fixed param where float8 converts), float8's pairing with
  precision, and :func:`machine_problems`: what this machine lacks to run a space's float8 trials.
- ``validate_kernels``: the ``kernels:`` list: each Triton kernel imported and turned into params
  (:mod:`autotune.kernels.listing` says how).
- ``validate_params``: the params section, one param at a time. Validation of anything that becomes
  params (e.g. a ``kernels:`` list of Triton kernels) goes here, or in a sibling module when it is large.
"""

from __future__ import annotations

from autotune.space.configurations import MAX_LISTED, Configurations, list_configurations
from autotune.space.params import ParamSpec
from autotune.space.problems import SpaceError
from autotune.space.searchspace import Space
from autotune.space.settings import (
    DEVICES,
    METRICS,
    SAMPLERS,
    Budget,
    FinalistsSpec,
    Objective,
    SamplerSpec,
    WorkloadSpec,
    parse_duration,
)
from autotune.space.validate import load_space
from autotune.space.validate_float8 import machine_problems

__all__ = [
    "DEVICES",
    "MAX_LISTED",
    "METRICS",
    "SAMPLERS",
    "Budget",
    "Configurations",
    "FinalistsSpec",
    "Objective",
    "ParamSpec",
    "SamplerSpec",
    "Space",
    "SpaceError",
    "WorkloadSpec",
    "list_configurations",
    "load_space",
    "machine_problems",
    "parse_duration",
]
