"""Validating data parallelism in a space: the ``gpus_per_trial:`` key, and the data-parallel knobs' pairings
(:mod:`autotune.knobs.data_parallel`).

``gpus_per_trial`` (an int >= 1, default 1) is how many ranks each trial runs as (:mod:`autotune.trial.ranks`). A
``data_parallel`` other than none needs 2 or more; a DDP setting away from its default with anything but
``data_parallel=ddp``, or ``fsdp_reshard_after_forward=false`` with anything but fsdp, is an invalid combination
(:meth:`autotune.knobs.Knobs.check_combination`), and every trial the sampler drew so would fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.knobs.registry import Knobs
from autotune.space.params import ParamSpec, _member
from autotune.space.problems import _INVALID, _quote, _Report

__all__: list[str] = []

KEY = "gpus_per_trial"
_DEFAULTS = Knobs()
# Each wrapper's own settings: they act on that data_parallel value only.
_SETTINGS = {
    "ddp": ("ddp_bucket_cap_mb", "ddp_gradient_as_bucket_view", "ddp_static_graph"),
    "fsdp": ("fsdp_reshard_after_forward",),
}


def _gpus_per_trial(data: Mapping[str, Any], report: _Report) -> Any:
    """The ``gpus_per_trial:`` key: 1 when absent, _INVALID (reported) when not an int >= 1."""
    raw = data.get(KEY, 1)
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        report.add(KEY, f"{_quote(raw)} is not a whole number >= 1")
        return _INVALID
    return raw


def _check_data_parallel(params: Mapping[str, ParamSpec], gpus_per_trial: Any, report: _Report) -> None:
    """A data-parallel wrapper only with 2 or more ranks; each wrapper's settings only with that wrapper."""
    spec = params.get("data_parallel")
    modes = tuple(spec.choices or ()) if spec is not None else ("none",)
    wrapped = [mode for mode in modes if mode != "none"]
    if wrapped and gpus_per_trial == 1:
        report.add(
            "params.data_parallel",
            f"{wrapped[0]} needs more than one process per trial, and this space runs one: set {KEY}: 2 (or more)",
        )
    for wrapper, names in _SETTINGS.items():
        for name in names:
            _check_wrapper_setting(params.get(name), wrapper, modes, report)


def _check_wrapper_setting(spec: ParamSpec | None, wrapper: str, modes: tuple[Any, ...], report: _Report) -> None:
    """Report ``spec``, one of ``wrapper``'s settings, where a value away from its default can meet a
    ``data_parallel`` other than ``wrapper``."""
    if spec is None:
        return
    default = getattr(_DEFAULTS, spec.name)
    if spec.choices is not None and all(choice == default for choice in spec.choices):
        return
    if not _member(wrapper, modes):
        report.add(
            f"params.{spec.name}",
            f"acts on data_parallel={wrapper} only, which this space never chooses: declare data_parallel before it "
            f"with {wrapper} and add when: {{data_parallel: [{wrapper}]}}",
        )
        return
    others = [mode for mode in modes if mode != wrapper]
    if any(_member(mode, spec.when.get("data_parallel", others)) for mode in others):
        report.add(
            f"params.{spec.name}",
            f"acts on data_parallel={wrapper} only; with another it is an invalid combination: add when: "
            f"{{data_parallel: [{wrapper}]}}",
        )
